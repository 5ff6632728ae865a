import Hummingbird
import ServiceKit
import WireTypes

/// `POST /internal/operators/verify`: the other services check operator keys here.
struct InternalOperatorsController {
    let operators: OperatorKeyStore

    func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.post("operators/verify") { request, context in
            let body = try await request.decodeJSON(as: OperatorVerificationRequest.self, context: context)
            guard case .key(let id, let name) = try await operators.verify(appID: body.appID, key: body.key) else {
                return try context.json(OperatorVerificationResponse(valid: false, keyID: nil, name: nil))
            }
            return try context.json(OperatorVerificationResponse(valid: true, keyID: id, name: name))
        }
    }
}
