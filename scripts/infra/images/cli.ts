import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../provision';
import { buildDependencyImages, buildServiceImages } from './build-images';

// `npm run images [-- tag]`: every Tamp image (buildah, from docker/) and the images of NATS,
// MinIO, FerretDB and the pods' pause container, as OCI archives in .images/ for
// `ctr images import` (or `skopeo copy oci-archive:… docker://registry/…` to push them).
const tag =
  process.argv[2] ??
  (JSON.parse(await readFile(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string })
    .version;
const images = [...(await buildDependencyImages()), ...(await buildServiceImages({ tag }))];
for (const image of images) console.log(`${image.name}\t${image.archive}`);
