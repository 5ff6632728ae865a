// The Subscription service's client: `Client`, `Components.Schemas` and `Operations` are generated at
// build time from openapi.json (a link to Services/Subscription/Sources/OpenAPI/openapi.json) by the
// swift-openapi-generator plugin. AppBackendClient puts the four together.
@_exported import OpenAPIRuntime
