import Foundation

/// A console member's role in an app's team (#47), each including the ones below it:
/// `viewer` reads; `support` also acts for a player (credits, premium, sessions, deletions);
/// `admin` also changes the app's settings, keys, stores, campaigns, push, webhooks and
/// catalogue; `owner` also manages the team and can disable the app.
public enum OperatorRole: String, Sendable, Codable, CaseIterable, Comparable {
    case viewer, support, admin, owner

    private var rank: Int {
        switch self {
        case .viewer: 0
        case .support: 1
        case .admin: 2
        case .owner: 3
        }
    }

    public static func < (a: OperatorRole, b: OperatorRole) -> Bool { a.rank < b.rank }
}

/// The least role an admin route needs, decided from the route alone so that every service
/// applies the same rule to its own routes (and a route added later gets a rule, not a gap).
public enum AdminAccess {
    /// `route` is the router's template (`/subscription/v1/admin/users/{id}/credits`) or, when
    /// no route matched, the path.
    public static func required(method: String, route: String) -> OperatorRole {
        let path = route.lowercased()
        // The team and the app itself: owners only, reading included for the invites.
        if path.contains("/admin/members") || path.contains("/admin/invites") || path.contains("/admin/console-settings")
            || path.hasSuffix("/admin/app/disable")
        {
            return method == "GET" && path.contains("/admin/members") ? .viewer : .owner
        }
        if method == "GET" || method == "HEAD" { return .viewer }
        // Acting for one player: support.
        if path.contains("/admin/users/") { return .support }
        return .admin
    }
}
