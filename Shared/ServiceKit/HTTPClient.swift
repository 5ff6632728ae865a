import CCurl
import Foundation
import Instrumentation
import Logging
import ServiceContextModule
import Synchronization
import Tracing

/// An outbound HTTP request (to another service, Google, Apple, a geocoder...).
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: Data?
    /// Whole-transfer limit (connect, send, wait, receive).
    public var timeout: Duration
    public var connectTimeout: Duration
    /// A PEM bundle to trust instead of the system's roots (a private PKI).
    public var caBundlePath: String?
    /// curl's `--resolve` entries (`host:port:address`): pin a host to an address.
    public var resolve: [String]

    public init(
        method: String = "GET",
        url: String,
        headers: [(String, String)] = [],
        body: Data? = nil,
        timeout: Duration = .seconds(10),
        connectTimeout: Duration = .seconds(2),
        caBundlePath: String? = nil,
        resolve: [String] = []
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        self.caBundlePath = caBundlePath
        self.resolve = resolve
    }

    /// A JSON request: encodes the body with the shared encoder and sets the content type.
    public static func json<T: Encodable>(_ method: String, _ url: String, body: T, headers: [(String, String)] = []) throws -> HTTPRequest {
        HTTPRequest(
            method: method,
            url: url,
            headers: headers + [("Content-Type", "application/json")],
            body: try JSON.encoder.encode(body)
        )
    }

    /// Safe to send twice: the method is idempotent or the request carries an idempotency key.
    public var isIdempotent: Bool {
        ["GET", "HEAD", "PUT", "DELETE", "OPTIONS"].contains(method.uppercased())
            || headers.contains { $0.0.lowercased() == "idempotency-key" }
    }
}

public struct HTTPResponseData: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: Data
    /// Connections libcurl had to open for this transfer (0 when one was reused).
    public var newConnections: Int

    public func header(_ name: String) -> String? {
        headers.last { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }

    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try JSON.decoder.decode(T.self, from: body)
    }

    public var isSuccess: Bool { (200..<300).contains(status) }
}

/// What can go wrong below HTTP, typed so callers can tell a slow peer from an absent one.
public enum HTTPClientError: Error, Equatable, CustomStringConvertible {
    case timeout(url: String)
    case connectionRefused(url: String)
    case couldNotResolve(url: String)
    case transport(code: Int, message: String)
    case shutdown

    public var description: String {
        switch self {
        case .timeout(let u): "timeout calling \(u)"
        case .connectionRefused(let u): "connection refused by \(u)"
        case .couldNotResolve(let u): "could not resolve \(u)"
        case .transport(let c, let m): "transport error \(c): \(m)"
        case .shutdown: "HTTP client shut down"
        }
    }
}

/// An SMTP message, sent through libcurl's SMTP support.
public struct SMTPMessage: Sendable {
    public var from: String
    public var to: [String]
    public var subject: String
    public var text: String
    public var headers: [(String, String)]

    public init(from: String, to: [String], subject: String, text: String, headers: [(String, String)] = []) {
        self.from = from
        self.to = to
        self.subject = subject
        self.text = text
        self.headers = headers
    }

    /// RFC 5322 text with CRLF line ends; the subject is RFC 2047-encoded when not ASCII.
    public func rendered(messageID: String = UUID().uuidString, date: Date = Date()) -> String {
        func encodeHeader(_ s: String) -> String {
            s.allSatisfy(\.isASCII) ? s : "=?UTF-8?B?\(Data(s.utf8).base64EncodedString())?="
        }
        let fmt = DateFormatter()
        fmt.locale = Locale(identifier: "en_US_POSIX")
        fmt.timeZone = TimeZone(identifier: "UTC")
        fmt.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        var lines = [
            "From: \(from)",
            "To: \(to.joined(separator: ", "))",
            "Subject: \(encodeHeader(subject))",
            "Date: \(fmt.string(from: date))",
            "Message-ID: <\(messageID)@app-backend>",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: 8bit",
        ]
        lines += headers.map { "\($0.0): \($0.1)" }
        // Dot-stuffing is done by libcurl; normalise line ends to CRLF.
        let body = text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: "\r\n")
        return lines.joined(separator: "\r\n") + "\r\n\r\n" + body + "\r\n"
    }
}

public struct SMTPServer: Sendable {
    /// `smtp://host:port` or `smtps://host:port`.
    public var url: String
    public var username: String?
    public var password: String?
    /// Require STARTTLS on `smtp://`.
    public var requireTLS: Bool
    public init(url: String, username: String? = nil, password: String? = nil, requireTLS: Bool = false) {
        self.url = url
        self.username = username
        self.password = password
        self.requireTLS = requireTLS
    }
}

/// HTTP and SMTP over libcurl. One thread drives a curl multi handle: transfers never block
/// an event loop or a Swift concurrency thread, and the multi handle's connection cache keeps
/// connections to the same host alive between calls.
public final class CurlHTTPClient: Sendable {
    private enum Kind: Sendable {
        case http(HTTPRequest)
        case smtp(SMTPServer, SMTPMessage, Duration)
    }

    private struct Submission: Sendable {
        var kind: Kind
        var continuation: CheckedContinuation<HTTPResponseData, any Error>
    }

    private struct State: Sendable {
        var pending: [Submission] = []
        var stopped = false
    }

    private let state = Mutex(State())
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let logger: Logger
    private let metrics: UpstreamMetrics?

    public init(logger: Logger = Logger(label: "http-client"), metrics: UpstreamMetrics? = nil) {
        self.metrics = metrics
        var fds: [Int32] = [0, 0]
        _ = pipe(&fds)
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        wakeRead = fds[0]
        wakeWrite = fds[1]
        self.logger = logger
        let thread = Thread { [self] in self.runLoop() }
        thread.name = "curl-multi"
        thread.start()
    }

    /// Stops the transfer thread; calls made afterwards fail with `.shutdown`.
    public func shutdown() {
        state.withLock { $0.stopped = true }
        wake()
    }

    /// Sends a request once.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponseData {
        var request = request
        if let id = RequestTrace.requestID, !request.headers.contains(where: { $0.0.lowercased() == "x-request-id" }) {
            request.headers.append(("X-Request-ID", id))
        }
        guard let current = ServiceContext.current else { return try await measured(request) }
        guard Telemetry.isRecording else {
            // Unsampled: no span, but the receiver learns the trace and that it is not sampled.
            Self.propagate(current, into: &request)
            return try await measured(request)
        }
        // #49: inside a trace, a client span (HTTP client conventions: the method, the server,
        // the status; never the path or query, which carry ids and tokens), and the receiver
        // continues the trace from `traceparent`.
        let span = Telemetry.startSpan(request.method, ofKind: .client)
        let server = Self.server(of: request.url)
        span.attributes["http.request.method"] = request.method
        span.attributes["server.address"] = server.host
        span.attributes["server.port"] = server.port
        span.attributes["url.scheme"] = server.scheme
        defer { span.end() }
        Self.propagate(span.context, into: &request)
        do {
            let response = try await measured(request)
            span.attributes["http.response.status_code"] = response.status
            if response.status >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return response
        } catch {
            span.attributes["error.type"] = String(describing: type(of: error))
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    /// `traceparent` (and `tracestate`) of `context` on the request, in place of any it had.
    static func propagate(_ context: ServiceContext, into request: inout HTTPRequest) {
        let fields = Telemetry.propagation(of: context)
        request.headers.removeAll { ["traceparent", "tracestate"].contains($0.0.lowercased()) }
        request.headers += fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Scheme, host and port of a URL, without its path, query or credentials.
    public static func server(of url: String) -> (scheme: String?, host: String?, port: Int?) {
        guard let components = URLComponents(string: url) else { return (nil, nil, nil) }
        let port = components.port ?? (components.scheme == "https" ? 443 : components.scheme == "http" ? 80 : nil)
        return (components.scheme, components.host, port)
    }

    private func measured(_ request: HTTPRequest) async throws -> HTTPResponseData {
        guard let metrics else { return try await submit(.http(request)) }
        let start = ContinuousClock.now
        do {
            let response = try await submit(.http(request))
            metrics.record(url: request.url, status: response.status, elapsed: ContinuousClock.now - start)
            return response
        } catch {
            metrics.record(url: request.url, status: nil, elapsed: ContinuousClock.now - start)
            throw error
        }
    }

    /// Sends a request, retrying an idempotent one on transport failures and 502/503/504
    /// with exponential backoff. Non-idempotent requests are sent once.
    public func send(_ request: HTTPRequest, retries: Int, backoff: Duration = .milliseconds(100)) async throws -> HTTPResponseData {
        let attempts = request.isIdempotent ? retries + 1 : 1
        var delay = backoff
        for attempt in 1...attempts {
            do {
                let response = try await send(request)
                if attempt < attempts, [502, 503, 504].contains(response.status) {
                    try await Task.sleep(for: delay)
                    delay *= 2
                    continue
                }
                return response
            } catch let error as HTTPClientError where attempt < attempts && error != .shutdown {
                logger.debug("retrying", metadata: ["url": "\(request.url)", "error": "\(error)"])
                try await Task.sleep(for: delay)
                delay *= 2
            }
        }
        throw HTTPClientError.shutdown  // unreachable: the last attempt returns or throws
    }

    /// Sends one email through an SMTP server.
    public func sendMail(_ message: SMTPMessage, via server: SMTPServer, timeout: Duration = .seconds(15)) async throws {
        _ = try await submit(.smtp(server, message, timeout))
    }

    private func submit(_ kind: Kind) async throws -> HTTPResponseData {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = state.withLock { state -> Bool in
                if state.stopped { return false }
                state.pending.append(Submission(kind: kind, continuation: continuation))
                return true
            }
            if accepted { wake() } else { continuation.resume(throwing: HTTPClientError.shutdown) }
        }
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    // MARK: the transfer thread

    /// Per-transfer buffers; lives on the transfer thread only.
    private final class Transfer {
        let submission: Submission
        let url: String
        var body = Data()
        var headers: [(String, String)] = []
        var status = 0
        var upload: [UInt8] = []
        var uploadOffset = 0
        var slists: [UnsafeMutablePointer<curl_slist>?] = []
        init(_ s: Submission, url: String) {
            submission = s
            self.url = url
        }
    }

    private func runLoop() {
        guard let multi = curl_multi_init() else { return }
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 64)
        var transfers: [UInt: Transfer] = [:]
        var running: Int32 = 0
        while true {
            let (batch, stopped) = state.withLock { s -> ([Submission], Bool) in
                let b = s.pending
                s.pending = []
                return (b, s.stopped)
            }
            for submission in batch {
                guard let easy = curl_easy_init() else {
                    submission.continuation.resume(throwing: HTTPClientError.transport(code: -1, message: "curl_easy_init failed"))
                    continue
                }
                let transfer = configure(easy, submission)
                transfers[UInt(bitPattern: easy)] = transfer
                curl_multi_add_handle(multi, easy)
            }
            if stopped {
                for (_, t) in transfers { t.submission.continuation.resume(throwing: HTTPClientError.shutdown) }
                break
            }
            curl_multi_perform(multi, &running)
            var easy: UnsafeMutableRawPointer? = nil
            var result = CURLE_OK
            while ccurl_multi_next_done(multi, &easy, &result) == 1, let done = easy {
                if let t = transfers.removeValue(forKey: UInt(bitPattern: done)) {
                    finish(done, t, result)
                }
                curl_multi_remove_handle(multi, done)
                curl_easy_cleanup(done)
            }
            var wfd = curl_waitfd(fd: wakeRead, events: Int16(CURL_WAIT_POLLIN), revents: 0)
            var numfds: Int32 = 0
            curl_multi_poll(multi, &wfd, 1, 1000, &numfds)
            if wfd.revents != 0 {
                var sink = [UInt8](repeating: 0, count: 256)
                while read(wakeRead, &sink, sink.count) > 0 {}
            }
        }
        curl_multi_cleanup(multi)
    }

    private func configure(_ easy: UnsafeMutableRawPointer, _ submission: Submission) -> Transfer {
        let transfer: Transfer
        let opaque: UnsafeMutableRawPointer
        switch submission.kind {
        case .http(let req):
            transfer = Transfer(submission, url: req.url)
            opaque = Unmanaged.passUnretained(transfer).toOpaque()
            _ = ccurl_setopt_string(easy, CURLOPT_URL, req.url)
            _ = ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
            _ = ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(req.connectTimeout.milliseconds))
            _ = ccurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(req.timeout.milliseconds))
            _ = ccurl_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
            let method = req.method.uppercased()
            if let body = req.body {
                body.withUnsafeBytes { raw in
                    let base = raw.baseAddress?.assumingMemoryBound(to: CChar.self)
                    _ = ccurl_setopt_postfields(easy, base, body.count)
                }
                if method != "POST" { _ = ccurl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method) }
            } else if method == "HEAD" {
                _ = ccurl_setopt_long(easy, CURLOPT_NOBODY, 1)
            } else if method != "GET" {
                _ = ccurl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method)
            }
            var list: UnsafeMutablePointer<curl_slist>? = nil
            // An empty Expect stops libcurl from waiting for 100-continue on larger bodies.
            for (name, value) in req.headers + [("Expect", "")] {
                list = curl_slist_append(list, value.isEmpty ? "\(name):" : "\(name): \(value)")
            }
            transfer.slists.append(list)
            _ = ccurl_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
            if let ca = req.caBundlePath { _ = ccurl_setopt_string(easy, CURLOPT_CAINFO, ca) }
            if !req.resolve.isEmpty {
                var entries: UnsafeMutablePointer<curl_slist>? = nil
                for r in req.resolve { entries = curl_slist_append(entries, r) }
                transfer.slists.append(entries)
                _ = ccurl_setopt_slist(easy, CURLOPT_RESOLVE, entries)
            }
        case .smtp(let server, let message, let timeout):
            transfer = Transfer(submission, url: server.url)
            opaque = Unmanaged.passUnretained(transfer).toOpaque()
            transfer.upload = Array(message.rendered().utf8)
            _ = ccurl_setopt_string(easy, CURLOPT_URL, server.url)
            _ = ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
            _ = ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000)
            _ = ccurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(timeout.milliseconds))
            _ = ccurl_setopt_string(easy, CURLOPT_MAIL_FROM, "<\(message.from)>")
            var rcpt: UnsafeMutablePointer<curl_slist>? = nil
            for r in message.to { rcpt = curl_slist_append(rcpt, "<\(r)>") }
            transfer.slists.append(rcpt)
            _ = ccurl_setopt_slist(easy, CURLOPT_MAIL_RCPT, rcpt)
            if let u = server.username { _ = ccurl_setopt_string(easy, CURLOPT_USERNAME, u) }
            if let p = server.password { _ = ccurl_setopt_string(easy, CURLOPT_PASSWORD, p) }
            if server.requireTLS { _ = ccurl_setopt_long(easy, CURLOPT_USE_SSL, Int(CURLUSESSL_ALL.rawValue)) }
            _ = ccurl_setopt_long(easy, CURLOPT_UPLOAD, 1)
            _ = ccurl_setopt_read_function(easy) { buffer, size, count, user in
                let t = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
                let n = min(size * count, t.upload.count - t.uploadOffset)
                if n > 0, let buffer {
                    t.upload.withUnsafeBufferPointer { src in
                        UnsafeMutableRawPointer(buffer).copyMemory(from: src.baseAddress! + t.uploadOffset, byteCount: n)
                    }
                    t.uploadOffset += n
                }
                return n
            }
            _ = ccurl_setopt_pointer(easy, CURLOPT_READDATA, opaque)
        }
        _ = ccurl_setopt_write_function(easy) { ptr, size, count, user in
            let t = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
            let n = size * count
            if let ptr, n > 0 { t.body.append(UnsafeRawPointer(ptr).assumingMemoryBound(to: UInt8.self), count: n) }
            return n
        }
        _ = ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, opaque)
        _ = ccurl_setopt_header_function(easy) { ptr, size, count, user in
            let t = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
            let n = size * count
            guard let ptr, n > 0 else { return n }
            let line = String(decoding: UnsafeRawBufferPointer(start: ptr, count: n), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            if line.hasPrefix("HTTP/") {
                t.headers = []  // a new response (after 100-continue or a redirect) starts over
            } else if let colon = line.firstIndex(of: ":") {
                t.headers.append(
                    (
                        String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                        String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
                    )
                )
            }
            return n
        }
        _ = ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, opaque)
        return transfer
    }

    private func finish(_ easy: UnsafeMutableRawPointer, _ t: Transfer, _ result: CURLcode) {
        for list in t.slists { curl_slist_free_all(list) }
        guard result == CURLE_OK else {
            let message = String(cString: curl_easy_strerror(result))
            let error: HTTPClientError =
                switch result {
                case CURLE_OPERATION_TIMEDOUT: .timeout(url: t.url)
                case CURLE_COULDNT_CONNECT: .connectionRefused(url: t.url)
                case CURLE_COULDNT_RESOLVE_HOST: .couldNotResolve(url: t.url)
                default: .transport(code: Int(result.rawValue), message: message)
                }
            t.submission.continuation.resume(throwing: error)
            return
        }
        var code = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        var connects = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        t.submission.continuation.resume(returning: HTTPResponseData(status: code, headers: t.headers, body: t.body, newConnections: connects))
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (s, atto) = components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}
