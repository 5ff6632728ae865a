import ArgumentParser
import Foundation
import NIOCore
import NIOPosix

/// A service binary's `main`. Swift concurrency's global executor becomes NIO's event loops
/// (`EventLoopGlobalExecutor`), so routes and queries continue on the thread that did their
/// I/O. Blocking work must stay off the loops: bcrypt runs on `NIOThreadPool`, libcurl on its
/// own thread.
public protocol ServiceEntry {
    associatedtype Command: AsyncParsableCommand
}

extension ServiceEntry {
    @MainActor
    public static func main() async {
        if !EventLoopGlobalExecutor.install() {
            // Still correct on Swift's own pool, only slower: said, not fatal.
            FileHandle.standardError.write(Data("warning: the event loops did not become the global executor (another hook is installed)\n".utf8))
        }
        await Command.main()
    }
}
