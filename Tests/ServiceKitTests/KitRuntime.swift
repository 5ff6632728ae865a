import AdsService
import AuthDomain
import AuthService
import OfflineService
import ServiceKit
import SubscriptionService
import TestSupport

/// A runtime for `service` that knows that service's real migrations: the schemas are
/// shared with the service tests, and a runtime with a shorter history would refuse them.
func kitRuntime(_ service: ServiceName, overrides: [String: String] = [:], clock: any WallClock = SystemClock()) -> ServiceRuntime {
    let migrations: [Migration]
    switch service {
    case .auth: migrations = try! AuthService.migrations()
    case .subscription: migrations = try! SubscriptionService.migrations()
    case .offline: migrations = try! OfflineService.migrations()
    case .ads: migrations = try! AdsService.migrations()
    }
    return TestEnvironment.runtime(service, migrations: migrations, overrides: overrides, clock: clock)
}
