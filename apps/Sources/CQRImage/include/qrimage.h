/* Images for QR codes, for the command-line client: a PNG or JPEG file
 * loaded as 8-bit grey (libpng, libjpeg), a grey image written as a PNG
 * file, and the QR codes in a grey image found and decoded (zbar).  Each
 * function returns 0 on success; otherwise it writes a one-line reason to
 * `error` (at most `error_cap` bytes, NUL-terminated) and returns -1.
 * Nothing here keeps state: any thread may call any function. */
#ifndef QRIMAGE_H
#define QRIMAGE_H

#include <stddef.h>
#include <stdint.h>

/* The largest image loaded, in pixels (about 10,000 x 10,000). */
#define QRIMAGE_MAX_PIXELS (100u * 1000u * 1000u)

/* Loads the PNG or JPEG image in `data` (`length` bytes, told apart by
 * their first bytes; `name` names it in the reason) as 8-bit grey, one
 * byte a pixel, rows top to bottom without padding, transparent pixels on
 * white; a JPEG in grey, RGB, YCbCr, CMYK or YCCK (CMYK inverted where an
 * Adobe marker says so).  On success *pixels is a buffer of *width * *height bytes that the
 * caller frees with qrimage_free.  It opens no file: the caller reads it,
 * refusing what is not a regular file (a FIFO would block). */
int qrimage_load_gray(const uint8_t *data, size_t length, const char *name, uint8_t **pixels, uint32_t *width,
                      uint32_t *height, char *error, size_t error_cap);

/* Frees a buffer of qrimage_load_gray; NULL is accepted. */
void qrimage_free(uint8_t *pixels);

/* Writes a grey image (one byte a pixel, rows without padding) to `path`
 * as a PNG file. */
int qrimage_write_png_gray(const char *path, const uint8_t *pixels, uint32_t width, uint32_t height,
                           char *error, size_t error_cap);

/* Calls found(ctx, data, length) for each QR code zbar finds in the grey
 * image, with its decoded bytes (valid during the call only); *count is
 * how many were found, 0 being a success too. */
int qrimage_scan(const uint8_t *pixels, uint32_t width, uint32_t height,
                 void (*found)(void *ctx, const char *data, size_t length), void *ctx,
                 int *count, char *error, size_t error_cap);

#endif
