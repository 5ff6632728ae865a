import ArgumentParser
import AdsService

@main
struct Entry: AsyncMainProtocol {
    typealias Command = AdsCommand
}
