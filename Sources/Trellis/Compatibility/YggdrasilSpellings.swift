// Yggdrasil's names for what Trellis spells its own way (the article "Migrating from Yggdrasil").

/// Yggdrasil's name for a JSON object whose shape is not declared.
public typealias JSONDictionary = [String: JSONValue]
