import Foundation
import Hummingbird
import NIOCore
import Prometheus
import Synchronization

/// Request counts and latencies per route, kept in this service's own Prometheus registry
/// (no process-wide metrics bootstrap, so tests can build many applications).
public struct MetricsMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    let registry: PrometheusCollectorRegistry
    static let buckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5),
    ]

    static var requests: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "http_requests",
            unitName: "total",
            helpText: "Answers by method, route pattern and status, errors included"
        )
    }
    static var duration: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "http_request_duration",
            unitName: "seconds",
            helpText: "Time from the request to its answer, by method and route pattern"
        )
    }

    /// The registry's metrics by (method, route, status), so a request does not rebuild the
    /// metric name, re-check the help text and hash label arrays in the registry each time (a
    /// few per cent of a cached read's CPU). Bounded: routes are patterns, statuses few.
    private let handles: Handles
    final class Handles: Sendable {
        struct Key: Hashable {
            let method: String
            let route: String
            let status: Int
        }
        let byKey = Mutex([Key: (Counter, DurationHistogram)]())
    }

    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        handles = Handles()
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        // The matched route pattern, never the raw path: ids must not become label values.
        let key = Handles.Key(method: request.method.rawValue, route: context.endpointPath ?? "unmatched", status: Int(response.status.code))
        let (counter, histogram) = handles.byKey.withLock { $0[key] } ?? metrics(for: key)
        counter.increment()
        histogram.recordNanoseconds((ContinuousClock.now - start).nanoseconds)
        return response
    }

    private func metrics(for key: Handles.Key) -> (Counter, DurationHistogram) {
        let made = (
            registry.makeCounter(descriptor: Self.requests, labels: [("method", key.method), ("route", key.route), ("status", String(key.status))]),
            registry.makeDurationHistogram(
                descriptor: Self.duration,
                labels: [("method", key.method), ("route", key.route)],
                buckets: Self.buckets
            )
        )
        handles.byKey.withLock { $0[key] = made }
        return made
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (s, atto) = components
        return s * 1_000_000_000 + atto / 1_000_000_000
    }
}
