import Hummingbird

/// The router, each request answered in a child task of the connection's task (#46).
///
/// A task's allocator keeps the slabs it grew to hold its deepest frames until the task ends,
/// and a connection's task lives as long as the connection: answered on it, a request's frames
/// (middleware chain, router, handler, Postgres calls) stay as ~25 KB of memory on every
/// kept-alive connection and every live stream. In a child task they are freed with it.
public struct ServiceResponder: HTTPResponder {
    public typealias Context = ServiceRequestContext
    let router: RouterResponder<ServiceRequestContext>

    public init(_ router: RouterResponder<ServiceRequestContext>) { self.router = router }

    public func respond(to request: Request, context: ServiceRequestContext) async throws -> Response {
        let router = router
        return try await inChildTask { try await router.respond(to: request, context: context) }
    }
}

/// Runs `body` in a child task and waits for it: the memory its frames needed is freed when it
/// returns, not kept by a long-lived caller's task (a connection's, a live stream's).
public func inChildTask<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask(operation: body)
        return try await group.next()!
    }
}

public typealias ServiceApplication = Application<ServiceResponder>
