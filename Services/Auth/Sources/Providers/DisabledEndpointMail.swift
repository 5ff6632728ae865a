import AuthMessaging
import Foundation
import Logging
import ServiceKit

/// Messaging disabled a webhook endpoint that failed every attempt for 5 days: the app's
/// support address hears of it, in the app's sender and name.
struct DisabledEndpointMail: DisabledEndpointNotice {
    let mailer: any Mailer
    let emails: EmailComposer
    let logger: Logger

    func endpointDisabled(app: UUID, url: String) async {
        do {
            let settings = try await emails.effective(app: app)
            try await mailer.send(
                SMTPMessage(
                    from: settings.mailFrom,
                    to: [settings.supportEmail],
                    subject: "\(settings.appName): a webhook endpoint was disabled",
                    text: "Every delivery to \(url) failed for 5 days, so the endpoint was disabled.\n"
                        + "Fix the receiver, then enable it again: PATCH /auth/v1/admin/webhooks/{id} {\"disabled\": false}.\n"
                )
            )
        } catch {
            logger.error("could not tell the operator of a disabled webhook endpoint", metadata: ["app": "\(app)", "error": "\(error)"])
        }
    }
}
