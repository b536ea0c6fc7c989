import Vocabulary
import AppleVerification
import Crypto
import Foundation

/// Where the agent's name and roles are in a token (`desk.oidc.name_claim`, `desk.oidc.roles_claim`) and which
/// values are which role (`desk.roles.*`).
package struct DeskClaims: Sendable, Equatable {
    var nameClaim = "email"
    var rolesClaim = "groups"
    var viewer = "support-viewer"
    var agent = "support-agent"
    var lead = "support-lead"

    package init(
        nameClaim: String = "email", rolesClaim: String = "groups", viewer: String = "support-viewer",
        agent: String = "support-agent", lead: String = "support-lead"
    ) {
        self.nameClaim = nameClaim
        self.rolesClaim = rolesClaim
        self.viewer = viewer
        self.agent = agent
        self.lead = lead
    }

    func name(_ payload: TokenClaims) -> String? {
        guard let name = payload[nameClaim]?.string, DeskText.isPlain(name, maxBytes: 255) else { return nil }
        return name
    }

    /// The roles the claim's values grant: a list of strings, or one string of space-separated values; a lead is
    /// an agent and a viewer, an agent a viewer.
    func roles(_ payload: TokenClaims) -> Set<AgentRole> {
        let values: [String]
        if let list = payload[rolesClaim]?.array {
            values = list.compactMap(\.string)
        } else if let text = payload[rolesClaim]?.string {
            values = text.split(separator: " ").map(String.init)
        } else {
            values = []
        }
        var roles = Set<AgentRole>()
        if values.contains(lead) { roles.formUnion([.lead, .agent, .viewer]) }
        if values.contains(agent) { roles.formUnion([.agent, .viewer]) }
        if values.contains(viewer) { roles.insert(.viewer) }
        return roles
    }
}

/// The desk's roles, lowest first.
package enum AgentRole: String, Sendable, Comparable, CaseIterable, Codable {
    case viewer, agent, lead

    package static func < (lhs: AgentRole, rhs: AgentRole) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A token's claims: the registered ones read as their types, any other (the name and roles claims the desk is
/// told of) by name, as a JSON value.
package struct TokenClaims: Sendable {
    private let claims: [String: JSONValue]

    init(_ claims: [String: JSONValue]) { self.claims = claims }

    subscript(name: String) -> JSONValue? { claims[name] }

    /// `iss`.
    var issuer: String? { claims["iss"]?.string }
    /// `sub`.
    var subject: String? { claims["sub"]?.string }
    /// `aud`: one string or a list of them (entries of another type skipped).
    var audiences: [String] { claims["aud"]?.array?.compactMap(\.string) ?? [claims["aud"]?.string].compactMap { $0 } }
    /// `nonce`.
    var nonce: String? { claims["nonce"]?.string }
}
