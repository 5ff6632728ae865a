import OfflineService
import ServiceKit

@main
struct Entry: ServiceEntry {
    typealias Command = OfflineCommand
}
