package io.github.coordinatormirror.kafka;

/** A JSON string literal for any Java string (RFC 8259: quote, backslash and controls escaped). */
final class Json {
  private Json() {}

  static void string(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    out.append('"');
  }
}
