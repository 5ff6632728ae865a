import ServiceKit
import OfflineService

@main
struct Entry: ServiceEntry {
    typealias Command = OfflineCommand
}
