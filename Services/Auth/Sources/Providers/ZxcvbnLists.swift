import AuthDomain
import Foundation

extension Zxcvbn {
    /// Loaded once per process from the service's resources (the Domain target holds no
    /// resources): the lists take ~1 MB and some milliseconds to index. A missing resource is a
    /// packaging error: the binary cannot judge passwords without it.
    static let shared: Zxcvbn = try! Zxcvbn(data: ZxcvbnData.load(bundle: .module))
}
