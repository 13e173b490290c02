package io.github.coordinatormirror.kafka;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The bridge's wire between Python and the JVM: big-endian ints and longs, strings as an int32
 * length (-1: null) and UTF-8 bytes, byte arrays the same way. One py4j call carries a whole
 * answer (100k groups, 500k partitions) as one byte array instead of a call per element; group ids
 * and topic names may hold any character, so nothing is separated by a delimiter.
 * {@code streaming/cluster/bridge.py} reads and writes the same layout.
 */
final class Frames {
  private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
  private final DataOutputStream out = new DataOutputStream(bytes);

  Frames i32(int v) {
    try {
      out.writeInt(v);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return this;
  }

  Frames i64(long v) {
    try {
      out.writeLong(v);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return this;
  }

  Frames i16(short v) {
    try {
      out.writeShort(v);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return this;
  }

  Frames str(String s) {
    return bin(s == null ? null : s.getBytes(StandardCharsets.UTF_8));
  }

  Frames bin(byte[] b) {
    try {
      if (b == null) {
        out.writeInt(-1);
      } else {
        out.writeInt(b.length);
        out.write(b);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return this;
  }

  byte[] done() {
    return bytes.toByteArray();
  }

  /** Reads what Python wrote with the same layout. */
  static final class Reader {
    private final DataInputStream in;

    Reader(byte[] data) {
      in = new DataInputStream(new ByteArrayInputStream(data));
    }

    boolean more() {
      try {
        return in.available() > 0;
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    int i32() {
      try {
        return in.readInt();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    String str() {
      int n = i32();
      if (n < 0) {
        return null;
      }
      byte[] b = new byte[n];
      try {
        in.readFully(b);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return new String(b, StandardCharsets.UTF_8);
    }
  }
}
