import ArgumentParser
import ServiceKit

/// `ads-service [serve | migrate]`.
public struct AdsCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "ads-service",
        abstract: "Ads eligibility, rewarded credits, consent, campaigns and revenue (port 3004)",
        subcommands: [ServeCommand<AdsService>.self, MigrateCommand<AdsService>.self],
        defaultSubcommand: ServeCommand<AdsService>.self)
    public init() {}
}
