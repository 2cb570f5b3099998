import Foundation
import HTTPTypes

/// How the storages keep a call's header fields: a JSON array of `[name, value]` pairs, in
/// order, repeated names kept. (`package`: `TrellisSQLite` and `TrellisPostgres` both use it.)
package enum OutboxFieldsCoding {
    package static func encode(_ fields: HTTPFields) -> Data {
        let pairs = fields.map { [$0.name.rawName, $0.value] }
        return (try? JSONEncoder().encode(pairs)) ?? Data("[]".utf8)
    }

    /// - Throws: ``OutboxError`` when `data` is not what ``encode(_:)`` wrote.
    package static func decode(_ data: Data) throws -> HTTPFields {
        let pairs: [[String]]
        do {
            pairs = try JSONDecoder().decode([[String]].self, from: data)
        } catch {
            throw OutboxError(.storageFailed, "the header fields of a stored call are not what Trellis wrote: \(error)")
        }
        var fields = HTTPFields()
        for pair in pairs where pair.count == 2 {
            if let name = HTTPField.Name(pair[0]) { fields.append(HTTPField(name: name, value: pair[1])) }
        }
        return fields
    }
}
