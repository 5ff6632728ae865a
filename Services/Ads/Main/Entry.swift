import ServiceKit
import AdsService

@main
struct Entry: ServiceEntry {
    typealias Command = AdsCommand
}
