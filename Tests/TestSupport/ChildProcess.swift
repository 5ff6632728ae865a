import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawnp`, not Foundation's `Process`: on Swift 6.3.1
/// `Process.run()` sometimes crashed the whole test process (signal 11 in
/// `findMaximumOpenFromProcSelfFD`, swift-corelibs-foundation #5472), about one run in five.
/// Output goes to files, not pipes, so a child that writes more than a pipe holds cannot block
/// on a parent that waits for it before reading.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    let directory: String
    let outPath: String
    let errPath: String
    /// Reaped already: its pid may belong to another process by now.
    private let reaped = Mutex(false)

    /// Starts `executable` (a path, or a name looked up in PATH) with `arguments`; `environment`
    /// nil keeps this process's; `input` is the child's standard input (empty when nil).
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: Data? = nil) throws {
        let dir = FileManager.default.temporaryDirectory.path + "/child-\(UUID().uuidString)"
        directory = dir
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        outPath = dir + "/out"
        errPath = dir + "/err"
        let inPath = dir + "/in"
        FileManager.default.createFile(atPath: inPath, contents: input ?? Data())

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, inPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)

        // The child starts with no blocked signal and default handlers: it inherits the spawning
        // thread's mask otherwise (NIO's threads block SIGTERM and SIGINT, and SIGPIPE is ignored).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = [executable] + arguments
        var child: pid_t = 0
        let status = withCStrings(argv) { argvPointers in
            withCStrings(env) { envPointers in
                posix_spawnp(&child, executable, &actions, &attributes, argvPointers, envPointers)
            }
        }
        guard status == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(executable): \(String(cString: strerror(status)))"])
        }
        pid = child
    }

    /// Waits for the child's end (or kills it after `timeout` seconds) and returns its exit status
    /// (128 + the signal's number when a signal ended it), what it wrote to stdout and to stderr.
    @discardableResult
    public func wait(timeout: TimeInterval? = nil) -> (status: Int32, out: String, err: String) {
        if let timeout {
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [self] in
                reaped.withLock { done in if !done { kill(pid, SIGKILL) } }
            }
        }
        let raw = reap()
        let signal = raw & 0x7f
        let status = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
        return (status, read(outPath), read(errPath))
    }

    /// SIGKILL and reap, for servers a test started and no longer needs.
    public func stop() {
        reaped.withLock { done in
            guard !done else { return }
            kill(pid, SIGKILL)
        }
        reap()
    }

    /// Waits for the end without reaping (a zombie keeps its pid, so a timer's kill cannot hit
    /// another process), then reaps under the lock.
    @discardableResult
    private func reap() -> Int32 {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        return reaped.withLock { done in
            guard !done else { return 0 }
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
            done = true
            return raw
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    public var standardOutputData: Data { FileManager.default.contents(atPath: outPath) ?? Data() }

    private func read(_ path: String) -> String {
        String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    }
}

/// NUL-terminated C strings for argv and envp, alive for the call.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { for p in pointers { free(p) } }
    return body(pointers)
}
