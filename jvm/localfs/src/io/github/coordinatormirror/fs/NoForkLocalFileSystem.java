package io.github.coordinatormirror.fs;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:}) without a child process per call.
 *
 * <p>Without Hadoop's native library, {@link RawLocalFileSystem} runs {@code chmod} for every file
 * it creates and {@code readlink} for every rename through {@code FileContext}: each a process
 * spawned by the JVM (~12 ms here).  Spark writes ~6 checkpoint files per micro-batch (offset log,
 * commit log, one state-store changelog per partition), each a create and a rename, so the stock
 * file system costs ~60 ms per file and several hundred milliseconds of every micro-batch
 * ({@code bench/checkpoint_fs.py}).  This class does the same two things with {@code java.nio};
 * everything else is Hadoop's own code.  Symbolic links, which Spark never creates, still go
 * through Hadoop's implementation.
 *
 * <p>Registered for both Hadoop APIs: {@code fs.file.impl} = this class (FileSystem) and
 * {@code fs.AbstractFileSystem.file.impl} = {@link Fs} (FileContext, what Spark's checkpoint
 * manager uses by default).
 */
public class NoForkLocalFileSystem extends LocalFileSystem {

    public NoForkLocalFileSystem() {
        super(new Raw());
    }

    /** The raw (checksum-free) layer with the two calls that spawned processes replaced. */
    public static class Raw extends RawLocalFileSystem {

        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            java.nio.file.Path file = pathToFile(p).toPath();
            try {
                Files.setPosixFilePermissions(file, posix(permission));
            } catch (NoSuchFileException e) {
                throw new FileNotFoundException("File " + p + " does not exist");
            }
        }

        @Override
        public FileStatus getFileLinkStatus(Path f) throws IOException {
            java.nio.file.Path file = pathToFile(f).toPath();
            BasicFileAttributes a;
            try {
                a = Files.readAttributes(file, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            } catch (NoSuchFileException e) {
                throw new FileNotFoundException("File " + f + " does not exist");
            }
            if (a.isSymbolicLink()) {
                return super.getFileLinkStatus(f);
            }
            return new FileStatus(
                    a.size(),
                    a.isDirectory(),
                    1,
                    getDefaultBlockSize(f),
                    a.lastModifiedTime().toMillis(),
                    a.lastAccessTime().toMillis(),
                    null,
                    null,
                    null,
                    f.makeQualified(getUri(), getWorkingDirectory()));
        }

        static Set<PosixFilePermission> posix(FsPermission permission) {
            Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
            add(out, permission.getUserAction(),
                    PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
                    PosixFilePermission.OWNER_EXECUTE);
            add(out, permission.getGroupAction(),
                    PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE,
                    PosixFilePermission.GROUP_EXECUTE);
            add(out, permission.getOtherAction(),
                    PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE,
                    PosixFilePermission.OTHERS_EXECUTE);
            return out;
        }

        private static void add(Set<PosixFilePermission> out, FsAction action,
                PosixFilePermission read, PosixFilePermission write, PosixFilePermission execute) {
            if (action.implies(FsAction.READ)) {
                out.add(read);
            }
            if (action.implies(FsAction.WRITE)) {
                out.add(write);
            }
            if (action.implies(FsAction.EXECUTE)) {
                out.add(execute);
            }
        }
    }

    /** The FileContext binding ({@code fs.AbstractFileSystem.file.impl}): checksums over {@link Raw}. */
    public static class Fs extends ChecksumFs {
        public Fs(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(new RawFs(uri, conf));
        }
    }

    /** FileContext's raw layer over {@link Raw}, as Hadoop's own {@code RawLocalFs} is over its class. */
    public static class RawFs extends DelegateToFileSystem {
        public RawFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(URI.create("file:///"), new Raw(), conf, "file", false);
        }
    }
}
