import ArgumentParser
import NIOCore
import NIOPosix

/// A service binary's `main`. Hummingbird and PostgresNIO do their I/O on NIO's event loops,
/// and by default every route and query continuation then hops to Swift's own concurrency pool
/// and back: two thread switches per await on a 2-core machine, which is most of a cached read's
/// latency tail. Making the event loops Swift's global executor removes those hops (Vapor's
/// template does the same). Blocking work must stay off them: bcrypt runs on `NIOThreadPool`,
/// libcurl on its own thread.
public protocol ServiceEntry {
    associatedtype Command: AsyncParsableCommand
}

extension ServiceEntry {
    @MainActor
    public static func main() async {
        _ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await Command.main()
    }
}
