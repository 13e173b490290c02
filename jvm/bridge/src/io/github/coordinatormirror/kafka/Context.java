package io.github.coordinatormirror.kafka;

import java.util.concurrent.Callable;

/** Runs a call with the thread's context class loader set to the bridge's own (see {@link Isolation}). */
final class Context {
  private Context() {}

  static <T> T call(ClassLoader loader, Callable<T> body) throws Exception {
    Thread thread = Thread.currentThread();
    ClassLoader before = thread.getContextClassLoader();
    thread.setContextClassLoader(loader);
    try {
      return body.call();
    } finally {
      thread.setContextClassLoader(before);
    }
  }

  /** {@link #call} with the loader of {@code owner}'s class. */
  static <T> T of(Object owner, Callable<T> body) throws Exception {
    return call(owner.getClass().getClassLoader(), body);
  }
}
