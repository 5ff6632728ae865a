import ArgumentParser
import SubscriptionService

@main
struct Entry: AsyncMainProtocol {
    typealias Command = SubscriptionCommand
}
