/* A user's own library, preloaded into the ranks by the launcher's own option
 * (test_launch_options.py): user_preload.c calls it when it is there. */
int user_preload_marker(void) { return 4242; }
