import AuthDomain
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import ServiceKit
import ServiceLifecycle
import Synchronization
import WireTypes

/// Auth's HTTP/1 connections, with the live WebSocket's upgrade (#46). NIO's upgrade handler
/// keeps no copy of a request it tried to upgrade: a refused one never reaches the router, and
/// hummingbird-websocket answers it with an empty 400 (an Upgrade on a kept-alive connection
/// with a 307). A client must get the JSON envelope (401 for a bad token, before anything
/// opens), so this channel notes the first request's head and answers a refused upgrade itself,
/// with the same checks as `GET /auth/v1/live/socket` (which answers a request that asked for
/// no upgrade: 426).
struct LiveUpgradeChannel: ServerChildChannel, HTTPChannelHandler {
    enum UpgradeResult: Sendable {
        /// The connection is a live stream's, served on its event loop (`LiveSocketFrames`).
        case websocket
        case notUpgraded(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let upgradeResult: EventLoopFuture<UpgradeResult>
        let channel: any Channel
        fileprivate let decision: Decision
    }

    let responder: HTTPChannelHandler.Responder
    let socket: LiveSocket

    /// What the upgrade decided, kept from the check to the new pipeline, and the first
    /// request's head when it asked for an upgrade (one per connection).
    fileprivate final class Decision: Sendable {
        let accepted = Mutex<LiveSocket.Accepted?>(nil)
        let upgradeHead = Mutex<HTTPRequestHead?>(nil)
    }

    /// Notes the connection's first request head if it asks for an upgrade, then steps aside.
    /// A first request NIO cannot parse (a control byte in a header) never yields a head, so
    /// the upgrade is never decided and nobody would answer: the connection hung, open, until
    /// the client gave up. This handler answers it as the other services do, with a 400, here
    /// with the envelope, and closes.
    private final class FirstHead: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let decision: Decision
        init(_ decision: Decision) { self.decision = decision }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .head(let head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
            if head.headers.contains(name: "upgrade") { decision.upgradeHead.withLock { $0 = head } }
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            guard error is HTTPParserError else { return context.fireErrorCaught(error) }
            let body =
                (try? JSONEncoder().encode(ErrorEnvelope(error: "invalid_request", message: "The request could not be parsed as HTTP/1.1")))
                .map { ByteBuffer(bytes: $0) } ?? ByteBuffer()
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: "\(body.readableBytes)")
            headers.add(name: "Connection", value: "close")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    static func builder(_ socket: LiveSocket) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in LiveUpgradeChannel(responder: responder, socket: socket) }
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let decision = Decision()
            let socket = self.socket
            let upgrader = NIOTypedWebSocketServerUpgrader<UpgradeResult>(
                maxFrameSize: 1 << 14,
                shouldUpgrade: { channel, head in
                    // Called only once the key and version 13 are there (NIO checks them).
                    let promise = channel.eventLoop.makePromise(of: HTTPHeaders?.self)
                    promise.completeWithTask {
                        guard let accepted = await socket.accept(head) else { return nil }
                        decision.accepted.withLock { $0 = accepted }
                        return HTTPHeaders()
                    }
                    return promise.futureResult
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        guard let accepted = decision.accepted.withLock({ $0 }) else { throw ChannelError.inputClosed }
                        try socket.serve(channel, accepted)
                        return UpgradeResult.websocket
                    }
                }
            )
            let upgrades = NIOTypedHTTPServerUpgradeConfiguration(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        // A refused upgrade's request never comes through (NIO drops it), so its
                        // answer is written without a request: the state handler would hold it.
                        if decision.upgradeHead.withLock({ $0 }) == nil {
                            try channel.pipeline.syncOperations.addHandler(HTTPConnectionStateHandler(idleTimeout: nil, logger: logger))
                        }
                        return UpgradeResult.notUpgraded(
                            try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                                wrappingChannelSynchronously: channel,
                                configuration: .init(isOutboundHalfClosureEnabled: true)
                            )
                        )
                    }
                }
            )
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<UpgradeResult>(upgradeConfiguration: upgrades)
            configuration.enablePipelining = false
            configuration.enableErrorHandling = false
            configuration.enableResponseHeaderValidation = false
            let negotiated = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            let upgradeHandler = try channel.pipeline.syncOperations.handler(type: NIOTypedHTTPServerUpgradeHandler<UpgradeResult>.self)
            try channel.pipeline.syncOperations.addHandler(socket.eventsHandler(), position: .before(upgradeHandler))
            try channel.pipeline.syncOperations.addHandler(FirstHead(decision), position: .before(upgradeHandler))
            return Value(upgradeResult: negotiated, channel: channel, decision: decision)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.upgradeResult.get() {
            case .notUpgraded(let http):
                if let head = value.decision.upgradeHead.withLock({ $0 }) {
                    await socket.refuse(head, on: http)
                } else {
                    await handleHTTP(asyncChannel: http, logger: logger)
                }
            case .websocket: break
            }
        } catch {
            logger.debug("connection ended before its first request", metadata: ["error": "\(error)"])
        }
    }
}

/// `GET /auth/v1/live/socket` upgraded: the stream's frames as text frames (the event with its
/// cursor), a ping as the heartbeat, the stream's end as a close frame with its code.
struct LiveSocket: Sendable {
    let path: String
    let authorizer: LiveAuthorizer
    let hub: LiveHub
    let logger: Logger

    struct Accepted: Sendable {
        var session: LiveRules.Session
        var resume: LiveRules.Resume
    }

    /// A request head as the route would see it: its path, query and fields.
    static func parts(_ head: HTTPRequestHead) -> (path: String, query: [String: String], fields: HTTPFields) {
        let uri = URI(head.uri)
        var fields = HTTPFields()
        for (name, value) in head.headers { if let n = HTTPField.Name(name) { fields.append(HTTPField(name: n, value: value)) } }
        return (uri.path, LiveAuthorizer.query(uri), fields)
    }

    func isOurs(_ path: String) -> Bool { path == self.path || path == self.path + "/" }

    /// The upgrade is accepted only for this route, with a cursor (or none) and a session that
    /// may open it; anything else goes on to be refused with the route's envelope.
    func accept(_ head: HTTPRequestHead) async -> Accepted? {
        let (path, query, fields) = Self.parts(head)
        guard isOurs(path), head.method == .GET, let (session, resume) = try? await authorizer.open(headers: fields, query: query) else {
            return nil
        }
        return Accepted(session: session, resume: resume)
    }

    /// Why an upgrade was not made, as the route would say it; written on the connection, which
    /// then closes.
    func refusal(_ head: HTTPRequestHead) async -> AppError {
        let (path, query, fields) = Self.parts(head)
        guard isOurs(path) else { return AppError.badRequest("Upgrade is answered on \(self.path) only (WebSocket)", field: "Upgrade") }
        return await authorizer.socketRefusal(headers: fields, query: query)
    }

    func refuse(_ head: HTTPRequestHead, on http: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) async {
        let refusal = await refusal(head)
        var envelope = ErrorEnvelope(error: refusal.code, message: refusal.message, extra: refusal.extra)
        if let id = head.headers.first(name: "x-request-id") { envelope.extra["request_id"] = .string(String(id.prefix(128))) }
        let body = (try? JSON.encoder.encode(envelope)) ?? Data()
        var fields = refusal.headers
        fields[.contentType] = "application/json; charset=utf-8"
        fields[.contentLength] = String(body.count)
        fields[.connection] = "close"
        logger.info("live socket refused", metadata: ["status": "\(refusal.status.code)", "error": "\(refusal.code)"])
        do {
            try await http.executeThenClose { _, outbound in
                try await outbound.write(.head(HTTPResponse(status: refusal.status, headerFields: fields)))
                try await outbound.write(.body(ByteBuffer(bytes: body)))
                try await outbound.write(.end(nil))
            }
        } catch {
            logger.debug("could not answer a refused upgrade", metadata: ["error": "\(error)"])
        }
    }

    /// The SSE route's handler for one connection (it shares this route's checks).
    func eventsHandler() -> LiveEventsHandler {
        LiveEventsHandler(path: String(path.dropLast("socket".count)) + "events", authorizer: authorizer, hub: hub, logger: logger)
    }

    /// On the upgraded connection's event loop: its stream, registered before it reads anything
    /// (what commits meanwhile is either read or heard).
    func serve(_ channel: any Channel, _ accepted: Accepted) throws {
        let stream = LiveStream(
            session: accepted.session,
            store: authorizer.store,
            hub: hub,
            sessions: authorizer.sessions,
            eventLoop: channel.eventLoop
        )
        let frames = LiveSocketFrames(stream: stream, hub: hub)
        try channel.pipeline.syncOperations.addHandler(frames)
        guard hub.open(stream) else {
            frames.close(code: 1012, reason: LiveEventType.closing.rawValue)
            return
        }
        channel.closeFuture.whenComplete { _ in stream.closed() }
        stream.start(resume: accepted.resume, sink: frames)
    }
}

/// A live stream's WebSocket: a ping is answered, a close ends it; the stream's frames go out as
/// text frames (the event with its cursor), a ping as the heartbeat, the end as a close frame
/// with its code.
final class LiveSocketFrames: ChannelInboundHandler, LiveFrameSink {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let stream: LiveStream
    let hub: LiveHub
    private var context: ChannelHandlerContext?
    private var closing = false
    /// The close waits for it: a close drops what the socket has not taken yet.
    private var lastWrite: EventLoopFuture<Void>?

    init(stream: LiveStream, hub: LiveHub) {
        self.stream = stream
        self.hub = hub
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            // The client's close is echoed, then the connection ends.
            closing = true
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)))
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        default: break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The server is stopping: `stream.closing`, then the close frame (1012).
        if event is ChannelShouldQuiesceEvent {
            hub.closeAll()
            stream.receive(.closing)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func write(_ frame: LiveStream.Frame) -> EventLoopFuture<Void> {
        guard let context, !closing else { return stream.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
        let written = send(frame, context: context)
        lastWrite = written
        return written
    }

    private func send(_ frame: LiveStream.Frame, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        switch frame {
        case .event(let cursor, _, let json):
            let text = LiveRules.socketText(cursor: cursor, json: json)
            return context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: text))))
        case .heartbeat:
            return context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer())))
        case .close(let code, let reason):
            closing = true
            var data = ByteBuffer()
            data.writeInteger(code)
            data.writeString(reason)
            return context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
        }
    }

    func close() {
        guard let context else { return }
        closing = true
        if let lastWrite {
            lastWrite.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        } else {
            context.close(promise: nil)
        }
    }

    func close(code: UInt16, reason: String) {
        _ = write(.close(code: code, reason: reason))
        close()
    }
}
