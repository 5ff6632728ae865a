import ServiceKit
import SubscriptionService

@main
struct Entry: ServiceEntry {
    typealias Command = SubscriptionCommand
}
