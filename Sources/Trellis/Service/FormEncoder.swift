import Foundation

/// Turns an `Encodable` value into form fields: properties become fields, arrays repeat their
/// name, nested values are named `outer[inner]`, `nil` properties are left out, and dates are
/// written in ISO 8601 like query values.
struct FormEncoder {
    struct Unsupported: Error, CustomStringConvertible {
        let description: String
    }

    func fields<Value: Encodable>(of value: Value) throws -> [(name: String, value: String)] {
        let sink = FieldSink()
        let encoder = FieldEncoder(sink: sink, name: nil)
        if let date = value as? Date {
            throw Unsupported(description: "a form needs named fields, not a single date \(date)")
        }
        try value.encode(to: encoder)
        return sink.fields
    }
}

private final class FieldSink {
    var fields: [(name: String, value: String)] = []
}

private struct FieldEncoder: Encoder {
    let sink: FieldSink
    let name: String?
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func child(_ key: String) -> String {
        name.map { "\($0)[\(key)]" } ?? key
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedFields<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedFields(encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleField(encoder: self)
    }

    func write(_ text: String) throws {
        guard let name else {
            throw FormEncoder.Unsupported(description: "a form needs named fields, not a single value \"\(text)\"")
        }
        sink.fields.append((name, text))
    }

    func encodeValue<Value: Encodable>(_ value: Value, as fieldName: String?) throws {
        let nested = FieldEncoder(sink: sink, name: fieldName)
        if let date = value as? Date {
            try nested.write(date.parameterValue)
        } else if let parameter = value as? any ParameterValue {
            try nested.write(parameter.parameterValue)
        } else {
            try value.encode(to: nested)
        }
    }

}

private struct KeyedFields<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: FieldEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode(_ value: Bool, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: String, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try put(value, key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try put(value, key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try encoder.encodeValue(value, as: encoder.child(key.stringValue))
    }

    private func put(_ value: some ParameterValue, _ key: Key) throws {
        encoder.sink.fields.append((encoder.child(key.stringValue), value.parameterValue))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        KeyedEncodingContainer(
            KeyedFields<NestedKey>(encoder: FieldEncoder(sink: encoder.sink, name: encoder.child(key.stringValue)))
        )
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        UnkeyedFields(encoder: FieldEncoder(sink: encoder.sink, name: encoder.child(key.stringValue)))
    }

    mutating func superEncoder() -> any Encoder { encoder }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        FieldEncoder(sink: encoder.sink, name: encoder.child(key.stringValue))
    }
}

/// Array elements repeat the array's own name, as query arrays do.
private struct UnkeyedFields: UnkeyedEncodingContainer {
    let encoder: FieldEncoder
    var codingPath: [any CodingKey] { [] }
    var count = 0

    mutating func encodeNil() throws { count += 1 }
    mutating func encode<T: Encodable>(_ value: T) throws {
        count += 1
        try encoder.encodeValue(value, as: encoder.name)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        count += 1
        return encoder.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        count += 1
        return UnkeyedFields(encoder: encoder)
    }

    mutating func superEncoder() -> any Encoder { encoder }
}

private struct SingleField: SingleValueEncodingContainer {
    let encoder: FieldEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil() throws {}
    mutating func encode<T: Encodable>(_ value: T) throws {
        try encoder.encodeValue(value, as: encoder.name)
    }
}
