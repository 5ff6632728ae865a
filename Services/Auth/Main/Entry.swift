import AuthService
import ServiceKit

@main
struct Entry: ServiceEntry {
    typealias Command = AuthCommand
}
