import Crypto
package import Foundation
package import HTTPClient
package import HTTPServerKit
package import LedgerDomain
package import Messaging
package import Observability
import Support

/// The support desk, put together from its settings and what its process gives it (the apps' desks, the ledger's
/// desk store, a way to publish a credit's event, an HTTP client for the sign-in provider): every request goes
/// through ``handle(_:)``. The process (`receipt-worker desk`) owns the server, the ledger and the producer.
package struct Desk: Sendable {
    /// What the desk needs of its `desk.*` keys (docs/support-desk.md), complete.
    package struct Settings: Sendable {
        package var publicURL: String
        package var issuer: String
        package var clientID: String
        package var clientSecret: String
        package var audience: String?
        package var scopes: String
        package var claims: DeskClaims
        package var clockSkew: TimeInterval
        package var keysMaxAge: TimeInterval
        package var authorizedParties: [String]
        package var sessionKey: [UInt8]
        package var sessionMaxAge: TimeInterval
        package var sessionIdle: TimeInterval
        package var caps: CreditCaps

        package init(
            publicURL: String, issuer: String, clientID: String, clientSecret: String, audience: String?,
            scopes: String, claims: DeskClaims, clockSkew: TimeInterval, keysMaxAge: TimeInterval,
            authorizedParties: [String], sessionKey: [UInt8], sessionMaxAge: TimeInterval, sessionIdle: TimeInterval,
            caps: CreditCaps
        ) {
            self.publicURL = publicURL
            self.issuer = issuer
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.audience = audience
            self.scopes = scopes
            self.claims = claims
            self.clockSkew = clockSkew
            self.keysMaxAge = keysMaxAge
            self.authorizedParties = authorizedParties
            self.sessionKey = sessionKey
            self.sessionMaxAge = sessionMaxAge
            self.sessionIdle = sessionIdle
            self.caps = caps
        }
    }

    private let router: DeskRouter
    private let provider: SignInProvider

    /// Nil when the session key is not 32 bytes, or OpenSSL makes no MAC with it.
    package init?(
        settings: Settings, apps: [DeskActions.App], store: any DeskStore,
        publish: @escaping @Sendable (StoredEvent) async throws -> DeliveryReport, finishTransactions: Bool,
        erasure: DeskActions.Erasure? = nil, http: HTTPClient,
        registry: MetricsRegistry, logger: Logger
    ) {
        guard let seal = Seal(key: settings.sessionKey) else { return nil }
        let metrics = DeskMetrics(registry: registry)
        let provider = SignInProvider(issuer: settings.issuer, http: http, keysMaxAge: settings.keysMaxAge)
        let actions = DeskActions(
            apps: apps, store: store, caps: settings.caps, publish: publish, finishTransactions: finishTransactions,
            metrics: metrics, now: { Date() }, erasure: erasure)
        guard
            let sessions = ConsoleSessions(
                store: store, maxAge: settings.sessionMaxAge, idle: settings.sessionIdle,
                sessionKey: settings.sessionKey)
        else { return nil }
        let clientID = settings.clientID
        router = DeskRouter(
            actions: actions,
            signIn: SignInFlow(
                provider: provider, seal: seal, sessions: sessions, logger: logger, clientID: clientID,
                clientSecret: settings.clientSecret, redirectURI: settings.publicURL + "/desk/callback",
                scopes: settings.scopes,
                verifier: TokenVerifier(
                    issuer: settings.issuer, audience: clientID, clockSkew: settings.clockSkew,
                    claims: settings.claims, authorizedParties: [clientID]),
                metrics: metrics),
            tokens: TokenVerifier(
                issuer: settings.issuer, audience: settings.audience ?? clientID, clockSkew: settings.clockSkew,
                claims: settings.claims,
                authorizedParties: Set(settings.authorizedParties.isEmpty ? [clientID] : settings.authorizedParties)),
            provider: provider, sessions: sessions, origin: settings.publicURL, metrics: metrics, logger: logger)
        self.provider = provider
    }

    /// The answer to one request to the desk's port.
    package func handle(_ request: ServerRequest) async -> ServerReply { await router.handle(request) }

    /// Requests being answered now (a credit between the ledger and the broker finishes before the desk stops).
    package var requestsInFlight: Int { router.inFlight.value }

    /// Fetches the provider's keys when they are stale; whether keys are at hand (readiness).
    package func refreshKeys() async -> Bool { await provider.refreshIfStale() }
}
