import AuthDomain
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ServiceKit
import WireTypes

/// `GET /auth/v1/live/events` (#46), Server-Sent Events, answered on the connection itself:
/// this handler sits after the HTTP/1 decoder of each of auth's connections, takes that route's
/// request before the router, authorizes it in a short task, then hands the connection to an
/// event-loop stream (`LiveStream`). A stream answered through the router kept its
/// connection's task suspended for its whole life, with the frames of the request that opened
/// it. Any other request passes through untouched.
final class LiveEventsHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        case passing
        /// The route's request, read to its end before it is answered; `first`: the
        /// connection's first request.
        case reading(HTTPRequestHead, first: Bool)
        case opening
        case streaming(LiveStream)
        case done
    }

    let path: String
    let authorizer: LiveAuthorizer
    let hub: LiveHub
    let logger: Logger
    /// The connection's first request, until a head has been seen: only then may a takeover
    /// free the connection's task (the upgrade it waits for is never asked for).
    private var first = true
    private var state = State.passing

    init(path: String, authorizer: LiveAuthorizer, hub: LiveHub, logger: Logger) {
        self.path = path
        self.authorizer = authorizer
        self.hub = hub
        self.logger = logger
    }

    func isOurs(_ head: HTTPRequestHead) -> Bool {
        guard head.method == .GET else { return false }
        let target = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        return target == path || target == path + "/"
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .passing:
            guard case .head(let head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
            let wasFirst = first
            first = false
            if head.headers.contains(name: "upgrade") {
                // Only a first request is upgraded; the new protocol's frames are not ours to read.
                context.fireChannelRead(data)
                if wasFirst { context.pipeline.syncOperations.removeHandler(self, promise: nil) }
                return
            }
            guard isOurs(head) else { return context.fireChannelRead(data) }
            state = .reading(head, first: wasFirst)
        case .reading(let head, let wasFirst):
            if case .end = unwrapInboundIn(data) { open(head, first: wasFirst, context: context) }
        case .opening, .streaming, .done:
            // Nothing more is read on a stream's connection (once its decoder is gone, what
            // comes is raw bytes).
            break
        }
    }

    private func open(_ head: HTTPRequestHead, first: Bool, context: ChannelHandlerContext) {
        state = .opening
        let (path, query, fields) = LiveSocket.parts(head)
        let requestID = head.headers.first(name: "x-request-id").flatMap { !$0.isEmpty && $0.utf8.count <= 128 ? $0 : nil } ?? UUID().uuidString
        let authorizer = authorizer
        let started = ContinuousClock.now
        context.eventLoop.makeFutureWithTask { try await authorizer.open(headers: fields, query: query) }
            .assumeIsolated()
            .whenComplete { result in
                guard case .opening = self.state, context.channel.isActive else { return }
                let status: HTTPResponseStatus
                switch result {
                case .success(let (session, resume)):
                    let stream = LiveStream(
                        session: session,
                        store: authorizer.store,
                        hub: self.hub,
                        sessions: authorizer.sessions,
                        eventLoop: context.eventLoop
                    )
                    if self.hub.open(stream) {
                        status = .ok
                        self.stream(stream, resume: resume, requestID: requestID, first: first, context: context)
                    } else {
                        let refusal = AppError(AuthErrorCode.shuttingDown, "This replica is stopping; open the stream again")
                        status = .init(statusCode: refusal.status.code)
                        self.refuse(refusal, requestID: requestID, context: context)
                    }
                case .failure(let error):
                    let refusal = error as? AppError ?? AppError.unavailable
                    status = .init(statusCode: refusal.status.code)
                    self.refuse(refusal, requestID: requestID, context: context)
                }
                let elapsed = ContinuousClock.now - started
                self.logger.info(
                    "request",
                    metadata: [
                        "method": "GET", "route": "\(path)", "status": "\(status.code)", "request_id": "\(requestID)",
                        "duration_ms":
                            "\(Double(elapsed.components.attoseconds / 1_000_000_000_000 + elapsed.components.seconds * 1_000_000) / 1000)",
                    ]
                )
            }
    }

    private func stream(_ stream: LiveStream, resume: LiveRules.Resume, requestID: String, first: Bool, context: ChannelHandlerContext) {
        state = .streaming(stream)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream")
        headers.add(name: "Cache-Control", value: "no-cache")
        headers.add(name: "X-Accel-Buffering", value: "no")
        headers.add(name: "X-Request-ID", value: requestID)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        // The client's reconnection delay, before anything else.
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "retry: 3000\n\n")))), promise: nil)
        context.channel.closeFuture.whenComplete { _ in stream.closed() }
        if first {
            // The connection is the stream's now. Its task, waiting for an upgrade that is never
            // asked for, ends when the upgrade's handler goes, and frees what it held; the
            // request decoder goes too (#46: ~3 KB and ~0.7 KB of each of 10,000 streams).
            let pipeline = context.pipeline.syncOperations
            if let upgrade = try? pipeline.handler(type: NIOTypedHTTPServerUpgradeHandler<LiveUpgradeChannel.UpgradeResult>.self) {
                pipeline.removeHandler(upgrade, promise: nil)
            }
            if let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
                pipeline.removeHandler(decoder, promise: nil)
            }
        }
        stream.start(resume: resume, sink: SSESink(context: context, handler: self))
    }

    /// The refusal's envelope; the connection then closes (a client opens a new one to retry).
    private func refuse(_ refusal: AppError, requestID: String, context: ChannelHandlerContext) {
        state = .done
        var envelope = ErrorEnvelope(error: refusal.code, message: refusal.message, extra: refusal.extra)
        envelope.extra["request_id"] = .string(requestID)
        let body = (try? JSON.encoder.encode(envelope)) ?? Data()
        var headers = HTTPHeaders()
        for field in refusal.headers { headers.add(name: field.name.rawName, value: field.value) }
        headers.replaceOrAdd(name: "Content-Type", value: "application/json; charset=utf-8")
        headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        headers.replaceOrAdd(name: "Connection", value: "close")
        headers.replaceOrAdd(name: "X-Request-ID", value: requestID)
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: refusal.status.code), headers: headers))),
            promise: nil
        )
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The server is stopping: the stream says `stream.closing` and its connection closes
        // (the server waits for every connection to close).
        if event is ChannelShouldQuiesceEvent, case .streaming(let stream) = state {
            hub.closeAll()
            stream.receive(.closing)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch state {
        case .passing: context.fireErrorCaught(error)
        default: context.close(promise: nil)
        }
    }

    /// A stream's frames as SSE lines: `id:`, `event:`, `data:`; a comment as the heartbeat.
    private final class SSESink: LiveFrameSink {
        let context: ChannelHandlerContext
        let handler: LiveEventsHandler
        init(context: ChannelHandlerContext, handler: LiveEventsHandler) {
            self.context = context
            self.handler = handler
        }

        func write(_ frame: LiveStream.Frame) -> EventLoopFuture<Void> {
            let text: String
            switch frame {
            case .event(let cursor, let type, let json): text = LiveRules.sse(cursor: cursor, type: type, json: json)
            case .heartbeat: text = ": heartbeat\n\n"
            case .close: return context.eventLoop.makeSucceededVoidFuture()
            }
            return context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))))
        }

        func close() {
            handler.state = .done
            let context = context
            context.writeAndFlush(handler.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }
}
