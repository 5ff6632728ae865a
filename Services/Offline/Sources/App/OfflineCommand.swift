import ArgumentParser
import ServiceKit

/// `offline-service [serve | migrate]`.
public struct OfflineCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "offline-service",
        abstract: "Offline content, sync, the offline queue and places (port 3003)",
        subcommands: [ServeCommand<OfflineService>.self, MigrateCommand<OfflineService>.self],
        defaultSubcommand: ServeCommand<OfflineService>.self)
    public init() {}
}
