import ArgumentParser
import AuthService

@main
struct Entry: AsyncMainProtocol {
    typealias Command = AuthCommand
}
