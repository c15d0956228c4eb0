/* MPI-IO reads and writes of every form, known numbers per form (tests/runtime/
 * test_io_mpi_forms.py):
 *   io_mpiio_forms DIR
 * DIR/forms.dat is opened on MPI_COMM_WORLD (a collective open) and its view set once; rank
 * r works in [r * REGION, (r + 1) * REGION) for the explicit offsets and at its file
 * pointer and the shared one otherwise. Writes, by form:
 *   independent 6: 3 MPI_File_write_at and 1 MPI_File_write of 64 bytes, 2
 *                  MPI_File_write_shared of 10;
 *   collective  4: 2 MPI_File_write_at_all and 1 MPI_File_write_all of 128 bytes, 1
 *                  MPI_File_write_ordered of 10;
 *   split       3: MPI_File_write_all_begin/_end and MPI_File_write_at_all_begin/_end of 200
 *                  bytes, MPI_File_write_ordered_begin/_end of 10;
 *   nonblocking 5: 2 MPI_File_iwrite_at, 1 MPI_File_iwrite and 1 MPI_File_iwrite_at_all of
 *                  50 bytes, 1 MPI_File_iwrite_shared of 10, each completed by MPI_Wait.
 * Reads: independent 2 MPI_File_read_at of 64, collective 1 MPI_File_read_at_all of 128,
 * split 1 MPI_File_read_at_all_begin/_end of 200, nonblocking 1 MPI_File_iread_at of 50 and
 * 1 MPI_File_iread_all of 50. One MPI_File_sync. Then DIR/self.R.dat is opened on
 * MPI_COMM_SELF (an independent open) and written once (64 bytes). Each rank prints what it
 * did, by construction: "rank R KEY VALUE". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGION (1 << 20)

static long long counts[2][4], bytes[2][4]; /* [read, write][indep, coll, split, nb] */

static void did(int write, int form, int n)
{
    counts[write][form]++;
    bytes[write][form] += n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2) {
        fprintf(stderr, "usage: io_mpiio_forms DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char path[4096], buf[256];
    memset(buf, 'x', sizeof buf);
    snprintf(path, sizeof path, "%s/forms.dat", argv[1]);
    MPI_File fh;
    MPI_Status st;
    MPI_Request req;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    MPI_Offset base = (MPI_Offset)rank * REGION;
    enum { INDEP, COLL, SPLIT, NB };

    for (int i = 0; i < 3; i++) {
        MPI_File_write_at(fh, base + i * 64, buf, 64, MPI_BYTE, &st);
        did(1, INDEP, 64);
    }
    MPI_File_seek(fh, base + 4096, MPI_SEEK_SET);
    MPI_File_write(fh, buf, 64, MPI_BYTE, &st);
    did(1, INDEP, 64);
    for (int i = 0; i < 2; i++) {
        MPI_File_write_shared(fh, buf, 10, MPI_BYTE, &st);
        did(1, INDEP, 10);
    }

    for (int i = 0; i < 2; i++) {
        MPI_File_write_at_all(fh, base + 8192 + i * 128, buf, 128, MPI_BYTE, &st);
        did(1, COLL, 128);
    }
    MPI_File_seek(fh, base + 16384, MPI_SEEK_SET);
    MPI_File_write_all(fh, buf, 128, MPI_BYTE, &st);
    did(1, COLL, 128);
    MPI_File_write_ordered(fh, buf, 10, MPI_BYTE, &st);
    did(1, COLL, 10);

    MPI_File_write_all_begin(fh, buf, 200, MPI_BYTE);
    MPI_File_write_all_end(fh, buf, &st);
    did(1, SPLIT, 200);
    MPI_File_write_at_all_begin(fh, base + 32768, buf, 200, MPI_BYTE);
    MPI_File_write_at_all_end(fh, buf, &st);
    did(1, SPLIT, 200);
    MPI_File_write_ordered_begin(fh, buf, 10, MPI_BYTE);
    MPI_File_write_ordered_end(fh, buf, &st);
    did(1, SPLIT, 10);

    for (int i = 0; i < 2; i++) {
        MPI_File_iwrite_at(fh, base + 65536 + i * 50, buf, 50, MPI_BYTE, &req);
        MPI_Wait(&req, &st);
        did(1, NB, 50);
    }
    MPI_File_iwrite(fh, buf, 50, MPI_BYTE, &req);
    MPI_Wait(&req, &st);
    did(1, NB, 50);
    MPI_File_iwrite_at_all(fh, base + 131072, buf, 50, MPI_BYTE, &req);
    MPI_Wait(&req, &st);
    did(1, NB, 50);
    MPI_File_iwrite_shared(fh, buf, 10, MPI_BYTE, &req);
    MPI_Wait(&req, &st);
    did(1, NB, 10);

    MPI_File_sync(fh);

    for (int i = 0; i < 2; i++) {
        MPI_File_read_at(fh, base + i * 64, buf, 64, MPI_BYTE, &st);
        did(0, INDEP, 64);
    }
    MPI_File_read_at_all(fh, base + 8192, buf, 128, MPI_BYTE, &st);
    did(0, COLL, 128);
    MPI_File_read_at_all_begin(fh, base + 32768, buf, 200, MPI_BYTE);
    MPI_File_read_at_all_end(fh, buf, &st);
    did(0, SPLIT, 200);
    MPI_File_iread_at(fh, base + 65536, buf, 50, MPI_BYTE, &req);
    MPI_Wait(&req, &st);
    did(0, NB, 50);
    MPI_File_seek(fh, base, MPI_SEEK_SET);
    MPI_File_iread_all(fh, buf, 50, MPI_BYTE, &req);
    MPI_Wait(&req, &st);
    did(0, NB, 50);
    MPI_File_close(&fh);

    snprintf(path, sizeof path, "%s/self.%d.dat", argv[1], rank);
    MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write(fh, buf, 64, MPI_BYTE, &st);
    MPI_File_close(&fh);

    static const char *const form[] = {"indep", "coll", "split", "nb"};
    for (int f = 0; f < 4; f++)
        printf("rank %d %s_reads %lld\nrank %d %s_writes %lld\n"
               "rank %d %s_read_bytes %lld\nrank %d %s_written %lld\n",
               rank, form[f], counts[0][f], rank, form[f], counts[1][f], rank, form[f], bytes[0][f],
               rank, form[f], bytes[1][f]);
    MPI_Finalize();
    return 0;
}
