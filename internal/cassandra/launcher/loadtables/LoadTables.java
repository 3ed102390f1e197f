// LoadTables runs sstableloader (BulkLoader.load) on several table directories in one JVM: a
// JVM start costs more CPU than streaming a small table, and a restore loads a dozen tables.
// Usage: LoadTables <sstableloader options without -tb and the directory> -- <dir>...; each
// directory's name is its table. It prints "loaded <table>" after each and exits non-zero at
// the first failure.
// It sits in BulkLoader's package because LoaderOptions.Builder is package-private there.
//
// Built into org/apache/cassandra/tools/LoadTables.class (embedded by sstableloader.go) with:
//   javac --release 17 -cp ~/.cache/shardmart/cassandra-5.0.8/lib/cassandra-all-5.0.8.jar -d . LoadTables.java
package org.apache.cassandra.tools;

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public final class LoadTables {
    public static void main(String[] args) {
        int sep = Arrays.asList(args).indexOf("--");
        if (sep < 0) {
            System.err.println("usage: LoadTables <sstableloader options> -- <table directory>...");
            System.exit(2);
        }
        String[] common = Arrays.copyOfRange(args, 0, sep);
        for (int i = sep + 1; i < args.length; i++) {
            String table = new File(args[i]).getName();
            List<String> a = new ArrayList<>(Arrays.asList(common));
            a.addAll(Arrays.asList("-tb", table, args[i]));
            try {
                BulkLoader.load(LoaderOptions.builder().parseArgs(a.toArray(new String[0])).build());
            } catch (Throwable t) {
                System.err.println("table " + table + ": " + t);
                System.exit(1);
            }
            System.out.println("loaded " + table);
            System.out.flush();
        }
        System.exit(0);
    }
}
