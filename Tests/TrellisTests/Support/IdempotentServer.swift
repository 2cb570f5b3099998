import Foundation
import NIOConcurrencyHelpers

/// A server that keeps the promises of the idempotency-key draft, over a ``ScriptedServer``: a
/// `POST /orders` with a key it has not seen is carried out (an order, counted once) and its
/// answer stored; the same key again gets the stored answer, `409` while the first is still in
/// progress, `422` with another payload; a `POST` without a key gets `400`.
///
/// `fault` chooses, for each first arrival of a key, what the network does to its answer after
/// the order is carried out: the answer, the connection closed before it (a reset after the
/// request reached the server), a stall, or the answer cut short. A key's later arrivals are
/// answered plainly. `inProgressArrivals` arrivals of a key after its first find it still in
/// progress (`409`), after which it is done.
final class IdempotentServer: Sendable {
    enum Fault: Sendable, CaseIterable {
        case none, resetAfterEffect, stall, cutAnswer
    }

    private struct Order {
        let payload: [UInt8]
        let number: Int
        /// Arrivals of the key after its first that still find it in progress.
        var inProgressLeft: Int
    }

    private struct State {
        var orders: [String: Order] = [:]
        /// The keys in the order their orders were carried out.
        var carriedOut: [String] = []
        var arrivals = 0
        var effects = 0
        var conflicts = 0
        var mismatches = 0
    }

    private let state = NIOLockedValueBox(State())
    private let fault: @Sendable (String) -> Fault
    private let inProgressArrivals: Int
    private let conflictRetryAfter: String?

    init(inProgressArrivals: Int = 0, conflictRetryAfter: String? = "0", fault: @escaping @Sendable (String) -> Fault = { _ in .none }) {
        self.inProgressArrivals = inProgressArrivals
        self.conflictRetryAfter = conflictRetryAfter
        self.fault = fault
    }

    /// How many orders were carried out.
    var effects: Int { state.withLockedValue { $0.effects } }
    /// The keys of the orders carried out, in the order they were.
    var carriedOut: [String] { state.withLockedValue { $0.carriedOut } }
    /// How many orders arrived, first arrivals and repeats.
    var arrivals: Int { state.withLockedValue { $0.arrivals } }
    /// How many arrivals were answered `409`, and `422`.
    var conflicts: Int { state.withLockedValue { $0.conflicts } }
    var mismatches: Int { state.withLockedValue { $0.mismatches } }

    /// The script to run a ``ScriptedServer`` with.
    var script: ScriptedServer.Script {
        { [self] received in answer(received) }
    }

    private func answer(_ received: ScriptedServer.Received) -> String {
        guard received.method == "POST", received.target.hasPrefix("/orders") else {
            return ScriptedServer.response("404 Not Found")
        }
        guard let field = received.field("Idempotency-Key") else {
            return Self.problem("400 Bad Request", "an Idempotency-Key is required for this operation")
        }
        let key = field.hasPrefix("\"") && field.hasSuffix("\"") && field.count >= 2 ? String(field.dropFirst().dropLast()) : field
        enum Step {
            case carriedOut(Int)
            case stored(Int)
            case inProgress
            case otherPayload
        }
        let step = state.withLockedValue { state -> Step in
            state.arrivals += 1
            guard var order = state.orders[key] else {
                state.effects += 1
                state.carriedOut.append(key)
                state.orders[key] = Order(payload: received.body, number: state.effects, inProgressLeft: inProgressArrivals)
                return .carriedOut(state.effects)
            }
            guard order.payload == received.body else {
                state.mismatches += 1
                return .otherPayload
            }
            if order.inProgressLeft > 0 {
                order.inProgressLeft -= 1
                state.orders[key] = order
                state.conflicts += 1
                return .inProgress
            }
            return .stored(order.number)
        }
        switch step {
        case .carriedOut(let number):
            let answer = Self.created(number, key: key)
            switch fault(key) {
            case .none: return inProgressArrivals > 0 ? "" : answer
            case .resetAfterEffect: return ""
            case .stall: return ScriptedServer.noAnswer
            case .cutAnswer: return ScriptedServer.thenClose(String(answer.prefix(answer.utf8.count - 5)))
            }
        case .stored(let number):
            return Self.created(number, key: key)
        case .inProgress:
            return ScriptedServer.response("409 Conflict", conflictRetryAfter.map { ["Retry-After: \($0)"] } ?? [], body: "in progress")
        case .otherPayload:
            return Self.problem("422 Unprocessable Content", "this key was used with another request")
        }
    }

    private static func created(_ number: Int, key: String) -> String {
        ScriptedServer.response("201 Created", ["Content-Type: application/json"], body: #"{"order":\#(number),"key":"\#(key)"}"#)
    }

    private static func problem(_ status: String, _ title: String) -> String {
        ScriptedServer.response(status, ["Content-Type: application/problem+json"], body: #"{"title":"\#(title)"}"#)
    }
}

/// What the orders server answers.
struct PlacedOrder: Decodable, Equatable {
    let order: Int
    let key: String
}
