public import Foundation
import Vocabulary

extension WorkerConfiguration {
    /// The support desk's keys (`desk.*`, docs/support-desk.md): where it listens, the studio's sign-in provider,
    /// the roles, the caps, the console's sessions. Read by every role; checked complete by `desk` alone
    /// (``checkedForDesk()``).
    public struct Desk: Sendable {
        /// `desk.listen`.
        public var listen: ListenAddress?
        /// `desk.public_url`: the console's origin as agents reach it, without a path.
        public var publicURL: String?
        /// `desk.oidc.issuer`, `desk.oidc.client_id`, `desk.oidc.client_secret_file` (its contents kept).
        public var issuer: String?
        public var clientID: String?
        public var clientSecret: String?
        /// `desk.oidc.audience`: what an API token's `aud` must hold. Default: the client id.
        public var audience: String?
        /// `desk.oidc.scopes`. Default: openid profile email.
        public var scopes = "openid profile email"
        /// `desk.oidc.roles_claim`, `desk.oidc.name_claim`. Defaults: groups, email.
        public var rolesClaim = "groups"
        public var nameClaim = "email"
        /// `desk.oidc.clock_skew_s`. Default: 60.
        public var clockSkew: TimeInterval = 60
        /// `desk.oidc.jwks_max_age_s`. Default: 3600.
        public var keysMaxAge: TimeInterval = 3_600
        /// `desk.oidc.ca_file`: a CA bundle for the provider's TLS.
        public var caFile: String?
        /// `desk.roles.viewer`, `.agent`, `.lead`: the claim's values of the roles.
        public var viewerRole = "support-viewer"
        public var agentRole = "support-agent"
        public var leadRole = "support-lead"
        /// `desk.caps.agent_daily`, `desk.caps.player_daily`. Defaults: 20, 2.
        public var agentDailyCap = 20
        public var playerDailyCap = 2
        /// `desk.session_key_file`: 32 bytes, from hex or base64 text.
        public var sessionKey: [UInt8]?
        /// `desk.session_max_age_s`. Default: 8 hours.
        public var sessionMaxAge: TimeInterval = 28_800
        /// `desk.session_idle_s`: a session unused this long ends. Default: 30 minutes.
        public var sessionIdle: TimeInterval = 1_800
        /// `desk.oidc.authorized_parties`: the clients whose API tokens the desk takes, when a token names its client
        /// (`azp`). Default: the console's client id alone.
        public var authorizedParties: [String] = []

        public init() {}

        /// The keys `receipt-worker desk` cannot start without, named when missing.
        public func checkedForDesk() throws -> Desk {
            let required: [(String, Bool)] = [
                ("desk.listen", listen != nil), ("desk.public_url", publicURL != nil),
                ("desk.oidc.issuer", issuer != nil),
                ("desk.oidc.client_id", clientID != nil), ("desk.oidc.client_secret_file", clientSecret != nil),
                ("desk.session_key_file", sessionKey != nil),
            ]
            if let missing = required.first(where: { !$0.1 }) {
                throw ConfigurationError(.missingKey, key: missing.0, reason: "is required by desk")
            }
            return self
        }
    }
}

extension ConfigurationKeys {
    private static let deskDefaults = WorkerConfiguration.Desk()

    static let desk: [ConfigurationKey] = [
        ConfigurationKey("desk.listen") { $1.configuration.desk.listen = try $0.listenAddress() },
        ConfigurationKey("desk.public_url") { value, draft in
            draft.configuration.desk.publicURL = try origin(value)
        },
        ConfigurationKey("desk.oidc.issuer") { value, draft in
            guard value.text.hasPrefix("https://"), URL(string: value.text)?.host != nil, value.text.utf8.count <= 512
            else { throw value.invalid("must be the provider's https issuer URL") }
            draft.configuration.desk.issuer = value.text
        },
        ConfigurationKey("desk.oidc.client_id") { $1.configuration.desk.clientID = try plain($0) },
        ConfigurationKey("desk.oidc.client_secret_file") { value, draft in
            guard draft.isWorker else { return }
            guard let contents = try value.fileContents() else {
                draft.configuration.desk.clientSecret = "(from \(value.text))"
                return
            }
            let secret = contents.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !secret.isEmpty else { throw value.invalid("the file is empty") }
            draft.configuration.desk.clientSecret = secret
        },
        ConfigurationKey("desk.oidc.audience") { $1.configuration.desk.audience = try plain($0) },
        ConfigurationKey("desk.oidc.scopes", default: deskDefaults.scopes) { value, draft in
            let scopes = value.text.split(separator: " ")
            guard scopes.contains("openid"),
                scopes.allSatisfy({ $0.allSatisfy { $0.isLetter || $0.isNumber || "_-:.".contains($0) } })
            else { throw value.invalid("must be space-separated scopes, openid among them") }
            draft.configuration.desk.scopes = value.text
        },
        ConfigurationKey("desk.oidc.roles_claim", default: deskDefaults.rolesClaim) {
            $1.configuration.desk.rolesClaim = try plain($0)
        },
        ConfigurationKey("desk.oidc.name_claim", default: deskDefaults.nameClaim) {
            $1.configuration.desk.nameClaim = try plain($0)
        },
        ConfigurationKey("desk.oidc.clock_skew_s", default: "60") {
            $1.configuration.desk.clockSkew = TimeInterval(try $0.integer(0...600))
        },
        ConfigurationKey("desk.oidc.jwks_max_age_s", default: "3600") {
            $1.configuration.desk.keysMaxAge = TimeInterval(try $0.integer(60...86_400))
        },
        ConfigurationKey("desk.oidc.ca_file") { $1.configuration.desk.caFile = try $0.readablePath() },
        ConfigurationKey("desk.oidc.authorized_parties") { value, draft in
            let parties = value.text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !parties.isEmpty, parties.count <= 32,
                parties.allSatisfy({
                    (1...128).contains($0.utf8.count) && $0.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
                })
            else { throw value.invalid("must be comma-separated client ids (1 to 32 of them, printable ASCII)") }
            draft.configuration.desk.authorizedParties = parties
        },
        ConfigurationKey("desk.roles.viewer", default: deskDefaults.viewerRole) {
            $1.configuration.desk.viewerRole = try plain($0)
        },
        ConfigurationKey("desk.roles.agent", default: deskDefaults.agentRole) {
            $1.configuration.desk.agentRole = try plain($0)
        },
        ConfigurationKey("desk.roles.lead", default: deskDefaults.leadRole) {
            $1.configuration.desk.leadRole = try plain($0)
        },
        ConfigurationKey("desk.caps.agent_daily", default: String(deskDefaults.agentDailyCap)) {
            $1.configuration.desk.agentDailyCap = try $0.integer(0...10_000)
        },
        ConfigurationKey("desk.caps.player_daily", default: String(deskDefaults.playerDailyCap)) {
            $1.configuration.desk.playerDailyCap = try $0.integer(0...10_000)
        },
        ConfigurationKey("desk.session_key_file") { value, draft in
            guard draft.isWorker else { return }
            guard let contents = try value.fileContents() else {
                draft.configuration.desk.sessionKey = Array(repeating: 0, count: 32)  // where the key will be
                return
            }
            guard let key = keyBytes(contents) else {
                throw value.invalid("must hold 32 random bytes as 64 hex digits or base64 (openssl rand -hex 32)")
            }
            draft.configuration.desk.sessionKey = key
        },
        ConfigurationKey("desk.session_max_age_s", default: "28800") {
            $1.configuration.desk.sessionMaxAge = TimeInterval(try $0.integer(300...604_800))
        },
        ConfigurationKey("desk.session_idle_s", default: "1800") {
            $1.configuration.desk.sessionIdle = TimeInterval(try $0.integer(60...604_800))
        },
    ]

    /// 1 to 128 printable ASCII characters: a claim's name, a client id, a role's value.
    private static func plain(_ value: ConfigurationValue) throws -> String {
        guard (1...128).contains(value.text.utf8.count), value.text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw value.invalid("must be 1 to 128 printable ASCII characters without spaces")
        }
        return value.text
    }

    /// `scheme://host[:port]`, nothing after: the origin browsers send in `Origin`.
    private static func origin(_ value: ConfigurationValue) throws -> String {
        let text = value.text.hasSuffix("/") ? String(value.text.dropLast()) : value.text
        guard let url = URL(string: text), let scheme = url.scheme, scheme == "https" || scheme == "http",
            url.host != nil, url.path.isEmpty, url.query == nil, url.user == nil
        else { throw value.invalid("must be an origin: https://host[:port], no path") }
        return text
    }

    /// 32 bytes from 64 hex digits or base64 text: a key file's contents.
    static func keyBytes(_ text: String) -> [UInt8]? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.utf8.count == 64, let bytes = Hex.decode(trimmed.utf8) { return bytes }
        if let data = Data(base64Encoded: trimmed), data.count == 32 { return Array(data) }
        return nil
    }
}
