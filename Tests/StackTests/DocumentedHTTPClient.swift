import Foundation
import HTTPTypes
import OpenAPIRuntime
import ServiceKit
import TestSupport
import WireTypes
import XCTest

/// The stack tests' HTTP client. Every answer the gateway gives under a service's prefix is held
/// to that service's OpenAPI document (#32): the operation must be documented, the status
/// declared, the media type declared, and a JSON body must match the declared schema, where an
/// object with `properties` is closed (a field the document does not name fails). So a handler
/// that drifts from its document fails `make test`, through every stack and journey test.
///
/// The documents leave `additionalProperties` open so that an app already shipped keeps decoding
/// when a later version adds a field; the tests are the strict side.
final class DocumentedHTTPClient: Sendable {
    let http = CurlHTTPClient()

    func shutdown() { http.shutdown() }

    func send(_ request: ServiceKit.HTTPRequest, file: StaticString = #filePath, line: UInt = #line) async throws -> HTTPResponseData {
        let response = try await http.send(request)
        check(request, response, file: file, line: line)
        return response
    }

    func send(_ request: ServiceKit.HTTPRequest, retries: Int, file: StaticString = #filePath, line: UInt = #line) async throws -> HTTPResponseData {
        let response = try await http.send(request, retries: retries)
        check(request, response, file: file, line: line)
        return response
    }

    private func check(_ request: ServiceKit.HTTPRequest, _ response: HTTPResponseData, file: StaticString, line: UInt) {
        let problems = APIContract.documents.problems(method: request.method, url: request.url, response: response)
        for problem in problems {
            XCTFail("contract: \(request.method) \(request.url.prefix(160)) answered \(response.status): \(problem)", file: file, line: line)
        }
        APIContract.record(request: request, response: response)
    }
}

/// The same check for the generated client (the journey): each answer it receives is held to
/// the document before the client decodes it.
struct ContractCheckMiddleware: ClientMiddleware {
    func intercept(
        _ request: HTTPTypes.HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPTypes.HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        // A stream (#46: the live events) never ends: its status and type are checked, its
        // events are the caller's to read as they come.
        if response.headerFields[.contentType] == "text/event-stream" {
            let url = baseURL.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + (request.path ?? "")
            for problem in APIContract.documents.problems(
                method: request.method.rawValue,
                url: url,
                status: response.status.code,
                contentType: "text/event-stream",
                body: Data()
            ) {
                XCTFail("contract: \(operationID) \(request.method.rawValue) \(url.prefix(160)) answered \(response.status.code): \(problem)")
            }
            return (response, responseBody)
        }
        var bytes = Data()
        if let responseBody { bytes = try await Data(collecting: responseBody, upTo: 64 << 20) }
        let url = baseURL.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + (request.path ?? "")
        for problem in APIContract.documents.problems(
            method: request.method.rawValue,
            url: url,
            status: response.status.code,
            contentType: response.headerFields[.contentType],
            body: bytes
        ) {
            XCTFail("contract: \(operationID) \(request.method.rawValue) \(url.prefix(160)) answered \(response.status.code): \(problem)")
        }
        return (response, bytes.isEmpty ? nil : HTTPBody(bytes))
    }
}

/// The four services' OpenAPI documents as committed (`Services/<Name>/Sources/OpenAPI/`), the
/// same files each service serves at `/<prefix>/v1/openapi.json`.
struct APIContract: Sendable {
    struct Operation: Sendable {
        let template: String
        let pattern: [Substring?]  // nil: a path parameter
        let responses: [String: JSONValue]
    }

    let services: [String: (document: JSONValue, operations: [String: [Operation]])]

    static let documents: APIContract = {
        var services: [String: (JSONValue, [String: [Operation]])] = [:]
        for (name, prefix) in [("Auth", "auth"), ("Subscription", "subscription"), ("Offline", "offline"), ("Ads", "ads")] {
            let path = "Services/\(name)/Sources/OpenAPI/openapi.json"
            guard let data = FileManager.default.contents(atPath: path),
                let doc = try? JSONDecoder().decode(JSONValue.self, from: data),
                case .object(let root) = doc, case .object(let paths)? = root["paths"]
            else {
                fatalError("no OpenAPI document at \(path) (the stack tests run from the repository root)")
            }
            var operations: [String: [Operation]] = [:]
            for (template, item) in paths {
                guard case .object(let methods) = item else { continue }
                let pattern = template.split(separator: "/", omittingEmptySubsequences: false).map { $0.hasPrefix("{") ? nil : $0 }
                for (method, op) in methods {
                    guard case .object(let o) = op, case .object(let responses)? = o["responses"] else { continue }
                    operations[method.uppercased(), default: []].append(Operation(template: template, pattern: pattern, responses: responses))
                }
            }
            services[prefix] = (doc, operations)
        }
        return APIContract(services: services)
    }()

    /// What is wrong with an answer (empty when it is what the document says). Only answers
    /// from a service's prefix through the gateway are held to a document.
    func problems(method: String, url: String, response: HTTPResponseData) -> [String] {
        problems(method: method, url: url, status: response.status, contentType: response.header("Content-Type"), body: response.body)
    }

    func problems(method: String, url: String, status: Int, contentType: String?, body: Data) -> [String] {
        guard url.hasPrefix(TestEnvironment.gatewayURL + "/"), let path = URLComponents(string: url)?.path else { return [] }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count > 2, let service = services[String(segments[1])], segments[2] == "v1" else { return [] }
        // The service's own documents and pages, and its probes, are not API operations.
        if ["/openapi.json", "/docs", "/health", "/ready", "/metrics"].contains(where: { path == "/\(segments[1])/v1" + $0 }) { return [] }
        let candidates = (service.operations[method.uppercased()] ?? []).filter { op in
            op.pattern.count == segments.count && zip(op.pattern, segments).allSatisfy { $0 == nil ? !$1.isEmpty : $0 == $1 }
        }
        // A literal segment beats a parameter (`/campaigns/active` before `/campaigns/{id}`).
        guard let operation = candidates.max(by: { $0.pattern.compactMap { $0 }.count < $1.pattern.compactMap { $0 }.count }) else {
            // An unknown route may be refused (the service's 404/405, the gateway's 413/414/431),
            // in the envelope; it may never be served.
            if (400..<500).contains(status) {
                return schemaProblems(
                    contentType: contentType,
                    body: body,
                    declared: ["application/json": .object(["schema": .object(["$ref": .string("#/components/schemas/Error")])])],
                    document: service.document
                )
            }
            return ["\(method) \(path.prefix(160)) is not in the document"]
        }
        var answer = operation.responses[String(status)] ?? operation.responses["default"]
        if case .object(let o)? = answer, case .string(let ref)? = o["$ref"] { answer = JSONSchemaCheck(document: service.document).resolve(ref) }
        guard case .object(let declared)? = answer else {
            return ["status \(status) is not declared for \(method) \(operation.template)"]
        }
        guard case .object(let content)? = declared["content"] else {
            return body.isEmpty ? [] : ["a body where \(method) \(operation.template) \(status) declares none"]
        }
        return schemaProblems(contentType: contentType, body: body, declared: content, document: service.document)
    }

    private func schemaProblems(contentType: String?, body: Data, declared: [String: JSONValue], document: JSONValue) -> [String] {
        let mediaType = (contentType ?? "").split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard case .object(let media)? = declared[mediaType] else {
            return ["media type '\(mediaType)' is not declared (\(declared.keys.sorted().joined(separator: ", ")))"]
        }
        guard mediaType == "application/json", let schema = media["schema"] else { return [] }
        guard let json = try? JSONDecoder().decode(JSONValue.self, from: body) else { return ["the body is not JSON"] }
        var problems: [String] = []
        JSONSchemaCheck(document: document).check(json, against: schema, at: "$", problems: &problems)
        return problems
    }

    /// With CONTRACT_RECORD set, each checked answer is appended there as a JSON line (what the
    /// documents' schemas were first written from).
    static func record(request: ServiceKit.HTTPRequest, response: HTTPResponseData) {
        guard let path = ProcessInfo.processInfo.environment["CONTRACT_RECORD"] else { return }
        let body =
            (try? JSONDecoder().decode(JSONValue.self, from: response.body)) ?? .string(String(decoding: response.body.prefix(200), as: UTF8.self))
        let line: JSONValue = .object([
            "method": .string(request.method), "url": .string(request.url), "status": .int(response.status),
            "content_type": .string(response.header("Content-Type") ?? ""), "body": body,
        ])
        guard var data = try? JSONEncoder().encode(line) else { return }
        data.append(0x0A)
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(data)
            try? handle.close()
        } else {
            FileManager.default.createFile(atPath: path, contents: data)
        }
    }
}

extension APIContract {
    /// Every schema of every document that leaves an object or an array untyped, by its path.
    func untypedSchemas() -> [String] {
        var found: [String] = []
        func walk(_ node: JSONValue, _ path: String) {
            switch node {
            case .object(let o):
                let types: [String] =
                    switch o["type"] {
                    case .string(let t)?: [t]
                    case .array(let ts)?: ts.compactMap(\.stringValue)
                    default: []
                    }
                if types.contains("object"), JSONSchemaCheck.isUntyped(o) { found.append(path) }
                if types.contains("array"), o["items"] == nil { found.append(path + " (items)") }
                for (k, v) in o where k != "example" && k != "examples" { walk(v, path + "/" + k) }
            case .array(let a):
                for (i, v) in a.enumerated() { walk(v, path + "[\(i)]") }
            default: break
            }
        }
        for (name, service) in services { walk(service.document, name) }
        return found.sorted()
    }
}

/// The part of JSON Schema (2020-12, as OpenAPI 3.1 uses it) the documents are written in.
struct JSONSchemaCheck {
    let document: JSONValue

    func resolve(_ ref: String) -> JSONValue? {
        guard ref.hasPrefix("#/") else { return nil }
        var node: JSONValue? = document
        for key in ref.dropFirst(2).split(separator: "/") {
            guard case .object(let o)? = node else { return nil }
            node = o[String(key)]
        }
        return node
    }

    func check(_ value: JSONValue, against schema: JSONValue, at path: String, problems: inout [String]) {
        guard case .object(let s) = schema else { return }
        if case .string(let ref)? = s["$ref"] {
            guard let target = resolve(ref) else {
                problems.append("\(path): unresolvable \(ref)")
                return
            }
            check(value, against: target, at: path, problems: &problems)
        }
        if case .array(let all)? = s["allOf"] { for sub in all { check(value, against: sub, at: path, problems: &problems) } }
        for key in ["oneOf", "anyOf"] {
            guard case .array(let options)? = s[key] else { continue }
            let matching = options.filter { option in
                var scratch: [String] = []
                check(value, against: option, at: path, problems: &scratch)
                return scratch.isEmpty
            }
            if matching.isEmpty || (key == "oneOf" && matching.count > 1) {
                problems.append("\(path): matches \(matching.count) of the \(key) schemas")
            }
        }
        if case .array(let allowed)? = s["enum"], !allowed.contains(value) {
            problems.append("\(path): \(short(value)) is not one of the documented values")
        }
        if let constant = s["const"], constant != value { problems.append("\(path): \(short(value)) is not \(short(constant))") }
        if let type = s["type"] {
            let types: [String]
            switch type {
            case .string(let t): types = [t]
            case .array(let ts): types = ts.compactMap { if case .string(let t) = $0 { return t } else { return nil } }
            default: types = []
            }
            guard types.contains(where: { matches(value, $0) }) else {
                problems.append("\(path): \(short(value)) is not \(types.joined(separator: " or "))")
                return
            }
        }
        switch value {
        case .object(let fields):
            // #45: an object the document does not describe is a hole in the contract, whatever
            // it holds: its fields are named (`properties`) or its values typed (`additionalProperties`).
            if Self.declaresObject(s), Self.isUntyped(s) {
                problems.append("\(path): the document leaves this object untyped (no properties, no additionalProperties)")
            }
            if case .array(let required)? = s["required"] {
                for case .string(let name) in required where fields[name] == nil {
                    problems.append("\(path): the required field '\(name)' is missing")
                }
            }
            let properties: [String: JSONValue]
            if case .object(let p)? = s["properties"] { properties = p } else { properties = [:] }
            for (name, field) in fields {
                if let property = properties[name] {
                    check(field, against: property, at: "\(path).\(name)", problems: &problems)
                } else if let extra = s["additionalProperties"], extra != .bool(true) {
                    if extra == .bool(false) {
                        problems.append("\(path): the field '\(name)' is not documented")
                    } else {
                        check(field, against: extra, at: "\(path).\(name)", problems: &problems)
                    }
                } else if s["properties"] != nil {
                    // Closed for the tests (see DocumentedHTTPClient).
                    problems.append("\(path): the field '\(name)' is not documented")
                }
            }
        case .array(let items):
            if let itemSchema = s["items"] {
                for (i, item) in items.enumerated() { check(item, against: itemSchema, at: "\(path)[\(i)]", problems: &problems) }
            } else if Self.declares(s, "array"), s["$ref"] == nil, s["allOf"] == nil, s["oneOf"] == nil, s["anyOf"] == nil {
                problems.append("\(path): the document leaves this array's items untyped")
            }
        case .string(let text):
            if case .string(let pattern)? = s["pattern"], text.range(of: pattern, options: .regularExpression) == nil {
                problems.append("\(path): '\(text.prefix(60))' does not match \(pattern)")
            }
        case .int, .double:
            let number: Double = if case .int(let i) = value { Double(i) } else if case .double(let d) = value { d } else { 0 }
            if let minimum = s["minimum"].flatMap(asDouble), number < minimum { problems.append("\(path): \(number) < \(minimum)") }
            if let maximum = s["maximum"].flatMap(asDouble), number > maximum { problems.append("\(path): \(number) > \(maximum)") }
        default: break
        }
    }

    /// An object schema that says nothing of its fields (`{"type": "object"}`): nothing
    /// composes it either.
    /// `type: object` (alone or with null); `{}` is any JSON value, said so on purpose.
    static func declaresObject(_ s: [String: JSONValue]) -> Bool { declares(s, "object") }

    static func declares(_ s: [String: JSONValue], _ type: String) -> Bool {
        switch s["type"] {
        case .string(let t)?: t == type
        case .array(let ts)?: ts.contains(.string(type))
        default: false
        }
    }

    static func isUntyped(_ s: [String: JSONValue]) -> Bool {
        guard s["properties"] == nil, s["additionalProperties"] == nil else { return false }
        for key in ["$ref", "allOf", "oneOf", "anyOf", "const", "enum"] where s[key] != nil { return false }
        return true
    }

    private func asDouble(_ v: JSONValue) -> Double? {
        switch v {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    private func matches(_ value: JSONValue, _ type: String) -> Bool {
        switch (value, type) {
        case (.null, "null"), (.bool, "boolean"), (.string, "string"), (.array, "array"), (.object, "object"): true
        case (.int, "integer"), (.int, "number"), (.double, "number"): true
        case (.double(let d), "integer"): d.rounded() == d
        default: false
        }
    }

    private func short(_ v: JSONValue) -> String {
        let text = (try? String(decoding: JSONEncoder().encode(v), as: UTF8.self)) ?? "?"
        return text.count > 60 ? String(text.prefix(60)) + "…" : text
    }
}
