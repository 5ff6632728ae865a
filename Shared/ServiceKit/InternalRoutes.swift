import HTTPTypes
import Hummingbird
import WireTypes

extension OutboxMessage {
    /// A message for `route`'s single callee, its path built by the route.
    public init<B: Encodable & Sendable, A>(_ route: InternalRoute<B, A>, to target: ServiceName? = nil, path: String, body: B) throws {
        try self.init(target: target ?? route.callee, method: route.method.rawValue, path: path, body: body)
    }

    /// A bodiless message (a DELETE).
    public init<A>(_ route: InternalRoute<NoBody, A>, to target: ServiceName, path: String) {
        self.init(target: target, method: route.method.rawValue, path: path)
    }
}

extension InternalRoute {
    /// The route's method as Hummingbird and HTTPTypes name it.
    public var httpMethod: HTTPTypes.HTTPRequest.Method {
        switch method {
        case .get: .get
        case .post: .post
        case .put: .put
        case .delete: .delete
        }
    }
    /// The path as Hummingbird matches it, under the service's internal group.
    var routerPath: RouterPath { RouterPath(routerTemplate) }
}

extension RouterMethods {
    /// Registers `route` on this (internal) group.
    @discardableResult public func on<B, A>(
        _ route: InternalRoute<B, A>,
        use handler: @Sendable @escaping (Request, Context) async throws -> some ResponseGenerator
    ) -> Self {
        on(route.routerPath, method: route.httpMethod, use: handler)
    }
}
