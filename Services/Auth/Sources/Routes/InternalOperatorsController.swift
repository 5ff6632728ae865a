import AuthDomain
import Hummingbird
import ServiceKit
import WireTypes

/// `POST /internal/operators/verify`: the other services check operator keys and console
/// members' tokens here (#47: the member's role now).
struct InternalOperatorsController {
    let operators: any OperatorVerifier

    func addRoutes(to group: RouterGroup<ServiceRequestContext>) {
        group.on(InternalRoutes.verifyOperator) { request, context in
            let body = try await request.decodeJSON(as: OperatorVerificationRequest.self, context: context)
            switch try await operators.verify(appID: body.appID, key: body.key) {
            case .key(let id, let name):
                return try context.json(OperatorVerificationResponse(valid: true, keyID: id, name: name))
            case .member(let id, let email, let role):
                return try context.json(
                    OperatorVerificationResponse(valid: true, keyID: nil, name: nil, memberID: id, email: email, role: role.rawValue)
                )
            case .platform, nil:
                return try context.json(OperatorVerificationResponse(valid: false, keyID: nil, name: nil))
            }
        }
    }
}
