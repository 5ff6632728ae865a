import AuthDomain
import Hummingbird
import ServiceKit
import WireTypes

/// `POST /internal/apps/verify`: the other services check tenant headers here.
struct InternalApplicationsController {
    let applications: any ApplicationRepository

    func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.verifyApp) { request, context in
            let body = try await request.decodeJSON(as: AppVerificationRequest.self, context: context)
            let verdict = try await applications.verdict(appID: body.appID, apiKey: body.apiKey)
            let name = verdict == .valid ? try await applications.find(id: body.appID)?.name : nil
            return try context.json(
                AppVerificationResponse(
                    valid: verdict == .valid,
                    appID: body.appID,
                    name: name,
                    disabled: verdict == .disabled ? true : nil
                )
            )
        }
    }
}
