import ArgumentParser
import OfflineService

@main
struct Entry: AsyncMainProtocol {
    typealias Command = OfflineCommand
}
