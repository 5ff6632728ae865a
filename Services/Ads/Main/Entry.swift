import AdsService
import ServiceKit

@main
struct Entry: ServiceEntry {
    typealias Command = AdsCommand
}
