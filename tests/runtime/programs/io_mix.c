/* io_mix DIR N: N rounds of write, pwrite, writev, pread64, preadv, stat and fstat on
 * DIR/mix.dat, then fwrite/fprintf/fgets through stdio on DIR/mix.txt. Prints what it
 * did (the test's ground truth): one "key value" per line. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char path[4096], tpath[4096], buf[8192];
    int n = argc > 2 ? atoi(argv[2]) : 10;
    snprintf(path, sizeof path, "%s/mix.dat", argv[1]);
    snprintf(tpath, sizeof tpath, "%s/mix.txt", argv[1]);
    memset(buf, 'x', sizeof buf);
    long written = 0, readb = 0, writes = 0, reads = 0, stats = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    for (int i = 0; i < n; i++) {
        written += write(fd, buf, 50);                    /* bin 0 (0-100) */
        written += pwrite(fd, buf, 2000, 100000 + i * 2000); /* bin 2 (1K-10K) */
        struct iovec iov[2] = {{buf, 300}, {buf, 400}};   /* 700: bin 1 */
        written += writev(fd, iov, 2);
        writes += 3;
        readb += pread64(fd, buf, 4000, 0);               /* bin 2 */
        struct iovec riov[1] = {{buf, 120}};              /* bin 1 */
        readb += preadv(fd, riov, 1, 10);
        reads += 2;
        struct stat st;
        stats += stat(path, &st) == 0;
        stats += fstat(fd, &st) == 0;
    }
    close(fd);
    FILE *f = fopen(tpath, "w");
    long fbytes = 0;
    for (int i = 0; i < n; i++) {
        fbytes += fwrite(buf, 1, 64, f);
        fbytes += fprintf(f, "line %d\n", 1000 + i); /* 10 bytes */
    }
    fclose(f);
    f = fopen(tpath, "r");
    long fread_bytes = fread(buf, 1, 64, f);
    fclose(f);
    printf("written %ld\nread %ld\nwrites %ld\nreads %ld\nstats %ld\nstdio_written %ld\n"
           "stdio_read %ld\npid %d\n",
           written, readb, writes, reads, stats, fbytes, fread_bytes, (int)getpid());
    return 0;
}
