import Foundation
package import Observability
package import Vocabulary

/// Money while it happens, from what the events say (docs/contract.md section 4, "Revenue"): what sales add to
/// indicative revenue and what refunds take back, by app and currency in Apple's milliunits, counted when the
/// ledger records them (an event published again is not counted again); a tester's purchases apart (a count: they
/// add no revenue). Few series: apps times currencies.
package final class MoneyMetrics: Sendable {
    package let registry: MetricsRegistry
    /// The series of every sale, by their labels' values (``SeriesMemo``).
    private let revenue = SeriesMemo<Counter>()
    private let sandboxSales = SeriesMemo<Counter>()

    package init(registry: MetricsRegistry) { self.registry = registry }

    /// A sale: revenue added, or a tester's purchase counted apart.
    package func sale(app: String, currency: String?, revenue: Int64?, environment: AppleEnvironment?) {
        if environment == .sandbox {
            sandboxSales.series(SeriesKey(app)) {
                registry.counter(
                    "receipt_worker_sandbox_sales_total",
                    help: "Tester's (Sandbox) purchases credited, by app: no revenue.", labels: ["app": app])
            }.increment()
            return
        }
        guard let revenue, revenue > 0 else { return }
        revenueCounter(app: app, currency: currency).increment(by: Int(clamping: revenue))
    }

    /// A refund (`revenue` 0 or negative) or its reversal (positive). `registering`: both series made, at 0.
    package func refund(app: String, currency: String?, revenue: Int64?, registering: Bool = false) {
        if registering {
            for sign in [Int64(-1), 1] {
                refund(app: app, currency: currency, revenue: sign, registering: false, by: 0)
            }
            return
        }
        guard let revenue, revenue != 0 else { return }
        refund(app: app, currency: currency, revenue: revenue, registering: false, by: Int(clamping: revenue.magnitude))
    }

    private func refund(app: String, currency: String?, revenue: Int64, registering: Bool, by amount: Int) {
        let counter =
            revenue < 0
            ? registry.counter(
                "receipt_worker_refunded_milliunits_total",
                help: "What refunds took back from indicative revenue, by app and currency (milliunits).",
                labels: ["app": app, "currency": Self.label(currency)])
            : registry.counter(
                "receipt_worker_refunds_reversed_milliunits_total",
                help: "What reversed refunds gave back to indicative revenue, by app and currency (milliunits).",
                labels: ["app": app, "currency": Self.label(currency)])
        counter.increment(by: amount)
    }

    /// An event the worker made, read back from its JSON (the notification and credit paths, not the jobs'):
    /// a sale or a refund by its type.
    package func count(_ event: [UInt8], app: String) {
        guard let money = try? JSONDecoder().decode(EventMoney.self, from: Data(event)) else { return }
        count(money, app: app)
    }

    /// The same, from the event's money fields already read.
    package func count(_ money: EventMoney, app: String) {
        let (currency, revenue) = (money.currency, money.revenue)
        switch money.type.flatMap(EventType.init(rawValue:)) {
        case .granted, .renewed, .unclaimed:
            sale(
                app: app, currency: currency, revenue: revenue,
                environment: money.environment.map(AppleEnvironment.init(rawValue:)))
        case .revoked, .reinstated:
            refund(app: app, currency: currency, revenue: revenue)
        default: break
        }
    }

    /// The revenue series of an app and currency, from 0 (so a rate reads 0, not "no data").
    package func revenueCounter(app: String, currency: String?) -> Counter {
        let currency = Self.label(currency)
        return revenue.series(SeriesKey(app, currency)) {
            registry.counter(
                "receipt_worker_revenue_milliunits_total",
                help:
                    "What sales added to indicative revenue, by app and currency (Apple's milliunits; Sandbox apart).",
                labels: ["app": app, "currency": currency])
        }
    }

    /// Every series of these apps from 0, in the currencies Apple sells in (and `other`), so that a rate counts an
    /// app's first sale in a currency too (a series that appears holding its first amount would not).
    package func prepare(apps: [String]) {
        for app in apps {
            registry.counter(
                "receipt_worker_sandbox_sales_total",
                help: "Tester's (Sandbox) purchases credited, by app: no revenue.", labels: ["app": app]
            ).increment(by: 0)
            for currency in Self.appleCurrencies + ["other"] {
                _ = revenueCounter(app: app, currency: currency)
                refund(app: app, currency: currency, revenue: 0, registering: true)
            }
        }
    }

    /// The currencies of Apple's storefronts (ISO 4217).
    package static let appleCurrencies = [
        "AED", "AUD", "BGN", "BRL", "CAD", "CHF", "CLP", "CNY", "COP", "CZK", "DKK", "EGP", "EUR", "GBP", "HKD", "HUF",
        "IDR", "ILS", "INR", "JPY", "KRW", "KZT", "MXN", "MYR", "NGN", "NOK", "NZD", "PEN", "PHP", "PKR", "PLN", "QAR",
        "RON", "RUB", "SAR", "SEK", "SGD", "THB", "TRY", "TWD", "TZS", "USD", "VND", "ZAR",
    ]

    /// ISO 4217's three capital letters, else `other`: a label never takes arbitrary text.
    package static func label(_ currency: String?) -> String {
        guard let currency, currency.utf8.count == 3, currency.utf8.allSatisfy({ (65...90).contains($0) }) else {
            return "other"
        }
        return currency
    }
}

/// What an event says of money, read back from its JSON: its type, the currency and revenue of its purchase, the
/// environment and the app's bundle id. A field of another type reads as absent.
package struct EventMoney: Decodable {
    package let type: String?
    package let currency: String?
    package let revenue: Int64?
    package let environment: String?
    package let bundleID: String?

    private enum CodingKeys: String, CodingKey {
        case type, currency, revenue, environment
        case bundleID = "bundle_id"
    }

    package init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        func text(_ key: CodingKeys) -> String? { (try? fields.decodeIfPresent(String.self, forKey: key)) ?? nil }
        type = text(.type)
        currency = text(.currency)
        revenue = (try? fields.decodeIfPresent(Int64.self, forKey: .revenue)) ?? nil
        environment = text(.environment)
        bundleID = text(.bundleID)
    }
}
