import ArgumentParser
import ServiceKit

/// `subscription-service [serve | migrate]`.
public struct SubscriptionCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "subscription-service",
        abstract: "Plans, store purchases, access rules, credits and store notifications (port 3002)",
        subcommands: [ServeCommand<SubscriptionService>.self, MigrateCommand<SubscriptionService>.self],
        defaultSubcommand: ServeCommand<SubscriptionService>.self)
    public init() {}
}
