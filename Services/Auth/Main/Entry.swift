import ServiceKit
import AuthService

@main
struct Entry: ServiceEntry {
    typealias Command = AuthCommand
}
