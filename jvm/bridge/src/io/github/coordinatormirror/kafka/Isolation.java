package io.github.coordinatormirror.kafka;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;

/**
 * Kafka clients of another version than the JVM's own, side by side in one JVM.
 *
 * <p>Spark's Kafka connector (4.2) brings kafka-clients 3.9 and cannot run on 4.x: its
 * consumer-based offset reader -- the one that lists internal topics -- calls {@code
 * Consumer.poll(long)}, which Kafka 4.0 removed (NoSuchMethodError, tried). The driver's own reads
 * want 4.x: {@code Admin.listGroups} lists share and streams groups, which 3.9's {@code
 * listConsumerGroups} drops. So the driver's clients live in a class loader of their own that looks
 * in its jars first (the bridge and kafka-clients 4.x) and asks its parent for everything else: the
 * JDK, slf4j (log lines reach the host's logging), Jackson (OAUTHBEARER's token endpoint answers)
 * and the compression codecs (JNI libraries load once per JVM).
 *
 * <p>Python creates one instance per JVM through a plain {@link URLClassLoader} over the bridge
 * jar and calls {@link #open}: the returned object is a public class of this package, called
 * through py4j by reflection.
 */
public final class Isolation {
  private ChildFirst loader;

  public Isolation() {}

  /**
   * A new {@code className} (a class of this package taking {@code (Map<String,String>, long)})
   * loaded from {@code jars}, constructed with the calling thread's context class loader set to
   * that loader: Kafka loads the classes named in its configuration (login modules, callback
   * handlers, config providers) through the context loader, so they must come from the same jars.
   *
   * <p>One loader per JVM, whatever jars later calls add (a plugin jar is appended): py4j caches
   * reflected methods by class <em>name</em>, so two loaders' {@code ClusterReads} in one JVM
   * would be called through each other's methods.
   */
  public Object open(List<String> jars, String className, Map<String, String> props, long timeoutMs)
      throws Exception {
    ClassLoader loader = loader(jars);
    return Context.call(loader, () -> {
      try {
        return loader.loadClass(className)
            .getConstructor(Map.class, long.class)
            .newInstance(props, timeoutMs);
      } catch (InvocationTargetException e) {
        // the constructor's own failure (a bad option, an unreadable key store), not reflection's
        Throwable cause = e.getCause();
        if (cause instanceof Exception) {
          throw (Exception) cause;
        }
        throw e;
      }
    });
  }

  private synchronized ClassLoader loader(List<String> jars) throws IOException {
    if (loader == null) {
      loader = new ChildFirst(new URL[0], Thread.currentThread().getContextClassLoader());
    }
    List<URL> have = List.of(loader.getURLs());
    for (String jar : jars) {
      URL url = Path.of(jar).toUri().toURL();
      if (!have.contains(url)) {
        loader.add(url);
      }
    }
    return loader;
  }

  /** Its own jars first, then the parent: the jars hold only Kafka's clients and this bridge. */
  static final class ChildFirst extends URLClassLoader {
    static {
      ClassLoader.registerAsParallelCapable();
    }

    ChildFirst(URL[] urls, ClassLoader parent) {
      super(urls, parent);
    }

    void add(URL url) {
      addURL(url);
    }

    @Override
    protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
      synchronized (getClassLoadingLock(name)) {
        Class<?> c = findLoadedClass(name);
        if (c == null && !name.startsWith("java.")) {
          try {
            c = findClass(name);
          } catch (ClassNotFoundException e) {
            // not one of ours: the parent's
          }
        }
        if (c == null) {
          return super.loadClass(name, resolve);
        }
        if (resolve) {
          resolveClass(c);
        }
        return c;
      }
    }

    @Override
    public URL getResource(String name) {
      URL own = findResource(name); // kafka/kafka-version.properties, message schemas, services
      return own != null ? own : super.getResource(name);
    }

    @Override
    public Enumeration<URL> getResources(String name) throws IOException {
      List<URL> all = new ArrayList<>(Collections.list(findResources(name)));
      ClassLoader parent = getParent();
      if (parent != null) {
        all.addAll(Collections.list(parent.getResources(name)));
      }
      return Collections.enumeration(all);
    }
  }
}
