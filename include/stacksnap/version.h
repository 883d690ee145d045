/* stacksnap version, written into captures and shown by --version. */
#ifndef STACKSNAP_VERSION_H
#define STACKSNAP_VERSION_H
#define SS_VERSION "0.1.0"
#endif
