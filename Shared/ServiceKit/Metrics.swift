import Foundation
import Hummingbird
import NIOCore
import Prometheus

/// Request counts and latencies per route, kept in this service's own Prometheus registry
/// (no process-wide metrics bootstrap, so tests can build many applications).
public struct MetricsMiddleware: RouterMiddleware {
    public typealias Context = ServiceRequestContext
    let registry: PrometheusCollectorRegistry
    static let buckets: [Duration] = [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
                                      .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
                                      .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5)]

    static var requests: MetricNameDescriptor { MetricNameDescriptor(metricName: "http_requests", unitName: "total",
                                               helpText: "Answers by method, route pattern and status, errors included") }
    static var duration: MetricNameDescriptor { MetricNameDescriptor(metricName: "http_request_duration", unitName: "seconds",
                                               helpText: "Time from the request to its answer, by method and route pattern") }

    public init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        // The matched route pattern, never the raw path: ids must not become label values.
        let route = context.endpointPath ?? "unmatched"
        let labels = [("method", request.method.rawValue), ("route", route), ("status", String(response.status.code))]
        registry.makeCounter(descriptor: Self.requests, labels: labels).increment()
        registry.makeDurationHistogram(descriptor: Self.duration, labels: [("method", request.method.rawValue), ("route", route)],
                                       buckets: Self.buckets).recordNanoseconds((ContinuousClock.now - start).nanoseconds)
        return response
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (s, atto) = components
        return s * 1_000_000_000 + atto / 1_000_000_000
    }
}
